#!/usr/bin/env bash
# bench/join-storm.sh: the join storm of tests/real/storm.rs with 100 workers (10 joining at a
# time) against the real v1.37.2 control plane, and its figures: join wall time p50/p99/max,
# bootstrap CSRs, and the API server's request counters over the storm, per join.
# Needs root and the real components (scripts/real-k8s). Environment: NODES (default 100),
# PARALLEL (default 10), CM_QPS (the controller-manager's kube-api-qps, burst twice it; default
# its own 20/30).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

export KUBESTRAP_STORM_NODES=${NODES:-100} KUBESTRAP_STORM_PARALLEL=${PARALLEL:-10}
if [[ -n ${CM_QPS:-} ]]; then export KUBESTRAP_STORM_CM_QPS=$CM_QPS; fi
if ! cargo test --release --test real storm -- --nocapture --test-threads 1 >"$log" 2>&1; then
  cat "$log" >&2
  exit 1
fi
# The test's own figures (after libtest's "test storm::join_storm ... "), and its verdict.
sed -n '/join storm:/,/^test result/{s/^test [^ ]* \.\.\. //;p;}' "$log"
