#!/usr/bin/env bash
# bench/upgrade-node.sh: `kubestrap upgrade node` beside the REAL `kubeadm upgrade node` v1.37.2
# on the same cluster shape (tests/real/join_parity.rs: a worker joined by each, the cluster's
# kubelet-config changed, then each tool upgrades its own worker), RUNS times (default 3): the
# wall time of each command. Prints each run's line, then the medians. Needs root and the real
# components (scripts/real-k8s).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
runs=${RUNS:-3}
log=$(mktemp)
trap 'rm -f "$log" "$log.run"' EXIT
cargo build --release -p kubestrap >/dev/null 2>&1 || cargo build --release -p kubestrap
cargo test --release --test real --no-run >/dev/null 2>&1 || cargo test --release --test real --no-run
for i in $(seq "$runs"); do
  if ! cargo test --release --test real join_parity -- --nocapture --test-threads 1 >"$log.run" 2>&1; then
    cat "$log.run" >&2
    exit 1
  fi
  line=$(grep '^upgrade-node:' "$log.run") || { cat "$log.run" >&2; echo "bench: no upgrade-node line" >&2; exit 1; }
  echo "run $i: $line" | tee -a "$log"
done
python3 - "$log" <<'PY'
import re, statistics, sys
ours, theirs = [], []
for line in open(sys.argv[1]):
    m = re.search(r"kubestrap ([\d.]+) s \| kubeadm ([\d.]+) s", line)
    if m:
        ours.append(float(m.group(1)))
        theirs.append(float(m.group(2)))
print(f"\nmedians over {len(ours)} runs: upgrade node on a worker")
print(f"kubestrap {statistics.median(ours):7.3f} s   kubeadm {statistics.median(theirs):7.3f} s")
PY
