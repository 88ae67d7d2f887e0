#!/usr/bin/env bash
# The kubestrap VM scenarios: builds the release binaries and the test image (cached), runs the
# scenarios under QEMU/TCG, builds the production image too, and prints the per-scenario results,
# QEMU-start -> done timings and the whole run time.
#   test-vm/run-all.sh [--all] [--no-build]    every scenario of `run.sh all` (the full suite)
#   test-vm/run-all.sh --lane [--no-build]     the landing lane (CI): the smoke set, this commit's
#       rotation slot and the scenarios the change touches, within LANE_BUDGET_S expected seconds
#       (default 2400; test-vm/lane.tsv, test-vm/lane/); prints what ran, what waited, and when
#       each last ran; CI's green lane (LANE_RECORD=1) is recorded in ~/.cache/kubestrap/vm-lane/history.tsv
# As root; env as for run.sh (VM_ACCEL, VM_TIMEOUT, VM_DEADLINE, ...).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
start=${EPOCHREALTIME/./}
mode=all args=()
for a in "$@"; do
    case "$a" in
        --all) mode=all ;;
        --lane) mode=lane ;;
        *) args+=("$a") ;;
    esac
done
rc=0
if [ "$mode" = lane ]; then
    history=${XDG_CACHE_HOME:-$HOME/.cache}/kubestrap/vm-lane/history.tsv
    budget=${LANE_BUDGET_S:-2400}
    lane() { (cd "$HERE/.." && cargo run -q -p vm-lane -- "$@"); }
    # The commit that lands, fixed now: the report recomputes this very plan.
    head=$(git -C "$HERE/.." rev-parse HEAD)
    sel=$(lane select --budget "$budget" --history "$history" --head "$head") || { echo "run-all: the lane's choice failed" >&2; exit 2; }
    read -r -a list <<<"$sel"
    results=$(mktemp)
    # The rotation's scenarios may wait for a later landing if CI's deadline comes first; the smoke
    # set and the touched ones may not.
    deferrable=$(lane select --budget "$budget" --history "$history" --head "$head" 2>&1 >/dev/null | awk '/rotation slot/ { print $2 }' | tr '\n' ' ')
    VM_RESULTS_OUT=$results VM_DEFERRABLE=$deferrable "$HERE/run.sh" "${args[@]}" "${list[@]}" || rc=$?
    # Only a landing (CI's run, LANE_RECORD=1) moves the base the next landing's change is measured from.
    record=()
    [ "$rc" -eq 0 ] && [ "${LANE_RECORD:-0}" = 1 ] && record=(--record)
    lane report "$results" --budget "$budget" --history "$history" --head "$head" "${record[@]}" || rc=1
    rm -f "$results"
else
    "$HERE/run.sh" "${args[@]}" all || rc=$?
fi
if [ "$rc" -eq 0 ]; then
    "$HERE/../image/build.sh" --no-cargo >/dev/null || { echo "run-all: production image build failed" >&2; rc=1; }
fi
end=${EPOCHREALTIME/./}
secs=$(((end - start) / 1000000))
echo "==== run-all ($mode): $([ "$rc" -eq 0 ] && echo PASS || echo FAIL) in ${secs} s ($((secs / 60))m$((secs % 60))s) ===="
exit "$rc"
