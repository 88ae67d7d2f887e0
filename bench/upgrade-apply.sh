#!/usr/bin/env bash
# bench/upgrade-apply.sh: kubestrap beside the real kubeadm v1.37.2 upgrading two v1.36.3 control
# planes made by kubestrap (tests/real/upgrade_apply.rs, UPGRADE_BY=kubestrap or kubeadm, in
# turns, RUNS times each, default 3): `upgrade apply v1.37.2` on the first, `upgrade node` on the
# second, each command's wall time. The kubelets run stand-in containers for the static Pods so
# that kubeadm's wait for Running Pods ends (tests/real/standins.rs); both tools' time is mostly
# the four components restarting one after the other. Then, once, the upgrade by image of three
# control planes and a worker at once (tests/real/upgrade_by_image_ha.rs; HA=0 skips it): its time
# and the API's longest gap through a load balancer. Needs root and the real components.
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
    UPGRADE_BY=$by run_test upgrade_apply::control_planes_kubestrap_made 'upgrade-[a-z]* (beside kubeadm)' | sed "s/^/run $i: /" | tee -a "$log"
  done
done
python3 - "$log" <<'PY'
import re, statistics, sys
lines = open(sys.argv[1]).read().splitlines()
print()
for cmd in ["upgrade-apply", "upgrade-node"]:
    for tool in ["kubestrap", "kubeadm"]:
        t = [float(m.group(1)) for m in (re.search(rf"{cmd} \(beside kubeadm\): {tool} ([\d.]+) s", l) for l in lines) if m]
        print(f"{cmd} v1.36.3 -> v1.37.2 (two control planes), {tool:9}: median of {len(t)} {statistics.median(t):.1f} s (min {min(t):.1f}, max {max(t):.1f})")
PY
[ "${HA:-1}" = 0 ] || run_test upgrade_by_image_ha 'upgrade by image:'
