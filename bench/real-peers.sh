#!/usr/bin/env bash
# bench/real-peers.sh: kubestrap beside the REAL kubeadm v1.37.2 on the real components
# (tests/real/peers.rs), RUNS times (default 3): the whole `init` and to cp-1's Node Ready, the
# whole `join` of a worker and to its Node Ready (kubeadm's with the real kubelet's own TLS
# bootstrap), and the API requests each made (the API server's audit log). Prints each run's
# lines, then the medians side by side. Needs root and the real components (scripts/real-k8s).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
runs=${RUNS:-3}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --release --test real --no-run >/dev/null 2>&1 || cargo test --release --test real --no-run
for i in $(seq "$runs"); do
  if ! cargo test --release --test real peers -- --nocapture --test-threads 1 >"$log.run" 2>&1; then
    cat "$log.run" >&2
    exit 1
  fi
  grep '^peers: \(init\|join\)' "$log.run" | sed "s/^/run $i: /" | tee -a "$log"
done
rm -f "$log.run"
python3 - "$log" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"run \d+: peers: (\w+)\s+(.*)", line)
    if not m:
        continue
    for side, part in zip(("kubestrap", "kubeadm"), m.group(2).split("|")):
        nums = [float(x) for x in re.findall(r"([\d.]+) (?:s|requests)", part)]
        rows.setdefault((m.group(1), side), []).append(nums)
print(f"\nmedians over {len(next(iter(rows.values())))} runs: command s, to Ready s, API requests")
for (what, side), vals in sorted(rows.items()):
    med = [statistics.median(col) for col in zip(*vals)]
    print(f"{what:5} {side:10} {med[0]:7.2f} s {med[1]:7.2f} s {med[2]:5.0f} requests")
PY
