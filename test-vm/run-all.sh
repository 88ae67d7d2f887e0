#!/usr/bin/env bash
# All kubestrap VM scenarios (the CI entry point): builds the release binaries and the test image
# (cached), runs every scenario under QEMU/TCG, builds the production image too, and prints the
# per-scenario results, QEMU-start -> done timings and the whole run time.
#   test-vm/run-all.sh [--no-build]       (as root; env as for run.sh: VM_ACCEL, VM_TIMEOUT, ...)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
start=${EPOCHREALTIME/./}
rc=0
"$HERE/run.sh" "$@" all || rc=$?
if [ "$rc" -eq 0 ]; then
    "$HERE/../image/build.sh" --no-cargo >/dev/null || { echo "run-all: production image build failed" >&2; rc=1; }
fi
end=${EPOCHREALTIME/./}
secs=$(((end - start) / 1000000))
echo "==== run-all: $([ "$rc" -eq 0 ] && echo PASS || echo FAIL) in ${secs} s ($((secs / 60))m$((secs % 60))s) ===="
exit "$rc"
