#!/usr/bin/env bash
# bench/upgrade-apply.sh: `upgrade apply v1.37.2` on v1.36.3 control planes made by kubestrap
# (tests/real/upgrade_apply.rs), RUNS times each (default 3):
#  - kubestrap beside the real kubeadm v1.37.2 on one control plane, in turns: the same test with
#    UPGRADE_APPLY_BY=kubestrap or kubeadm (its kubelet runs stand-in containers for the static
#    Pods so that kubeadm's wait for Running Pods ends; tests/real/standins.rs);
#  - kubestrap on two control planes (the HA test's shape).
# Both are mostly the four components restarting one after the other. Then, once, the upgrade by
# image of three control planes and a worker at once (tests/real/upgrade_by_image_ha.rs; HA=0
# skips it): its time and the API's longest gap through a load balancer. Needs root and the real
# components.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
runs=${RUNS:-3}
log=$(mktemp)
trap 'rm -f "$log" "$log.run"' EXIT
cargo build --release -p kubestrap >/dev/null 2>&1 || cargo build --release -p kubestrap
cargo test --release --test real --no-run >/dev/null 2>&1 || cargo test --release --test real --no-run
run_test() {   # run_test NAME PATTERN: the test's line matching PATTERN
  if ! cargo test --release --test real "$1" -- --nocapture --test-threads 1 >"$log.run" 2>&1; then
    cat "$log.run" >&2
    exit 1
  fi
  grep -o "$2.*" "$log.run" || { cat "$log.run" >&2; echo "bench: no $2 line" >&2; exit 1; }
}
for i in $(seq "$runs"); do
  for by in kubestrap kubeadm; do
    echo "run $i: $(UPGRADE_APPLY_BY=$by run_test upgrade_apply::a_control_plane_kubestrap_made 'upgrade-apply (one')" | tee -a "$log"
  done
  echo "run $i: $(run_test upgrade_apply::a_control_plane_upgraded 'upgrade-apply:') (two control planes)" | tee -a "$log"
done
python3 - "$log" <<'PY'
import re, statistics, sys
lines = open(sys.argv[1]).read().splitlines()
def times(pattern):
    return [float(m.group(1)) for m in (re.search(pattern, l) for l in lines) if m]
print()
for label, pattern in [("one control plane, kubestrap", r"one control plane\): kubestrap ([\d.]+) s"),
                       ("one control plane, kubeadm  ", r"one control plane\): kubeadm ([\d.]+) s"),
                       ("two control planes, kubestrap", r"upgrade-apply: kubestrap ([\d.]+) s")]:
    t = times(pattern)
    print(f"upgrade apply v1.36.3 -> v1.37.2, {label}: median of {len(t)} {statistics.median(t):.1f} s (min {min(t):.1f}, max {max(t):.1f})")
PY
[ "${HA:-1}" = 0 ] || run_test upgrade_by_image_ha 'upgrade by image:'
