#!/usr/bin/env bash
# bench/upgrade-apply.sh: `kubestrap upgrade apply v1.37.2` on a v1.36.3 control plane (two control
# planes; tests/real/upgrade_apply.rs), RUNS times (default 3): the wall time of the command,
# whose time is mostly the four components restarting one after the other. Then, once, the
# upgrade by image of three control planes and a worker at once (tests/real/upgrade_by_image_ha.rs; HA=0 skips it):
# its time and the API's longest gap through a load balancer. The real kubeadm's `upgrade apply`
# cannot run beside it here: it waits for every control-plane Pod to be Running, and the test
# harness runs the static Pods as processes (docs/testing.md). Needs root and the real components.
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
  echo "run $i: $(run_test upgrade_apply::a_control_plane_upgraded 'upgrade-apply:')" | tee -a "$log"
done
python3 - "$log" <<'PY'
import re, statistics, sys
t = [float(m.group(1)) for m in (re.search(r"kubestrap ([\d.]+) s", l) for l in open(sys.argv[1])) if m]
print(f"\nupgrade apply v1.36.3 -> v1.37.2, median of {len(t)}: {statistics.median(t):.1f} s (min {min(t):.1f}, max {max(t):.1f})")
PY
[ "${HA:-1}" = 0 ] || run_test upgrade_by_image_ha 'upgrade by image:'
