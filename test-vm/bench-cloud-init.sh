#!/usr/bin/env bash
# Benchmark (optional, not part of run-all): kubestrap's first-boot units vs Debian's cloud-init
# on the same image (issue #12 item 3). BENCH_BOOTS rounds (default 3), each of three boots in
# turn, so that load drift hits all three alike:
#   (a) control plane: the test image, run.sh's cp-init user-data (kubestrap init);
#   (b) worker: run.sh's worker-join set-up (kubestrap init + kube-double on the host at
#       10.0.2.2, in a network namespace of its own), JoinConfiguration user-data;
#   (c) cloud-init: the same recipe plus Debian's cloud-init, trivial #cloud-config, kubestrap's
#       units masked.
# Per boot: the units' run time (kubestrap.service + kubestrap-post.service, or cloud-init's four
# stages; each the unit's main process run time from systemd's timestamps; for kubestrap also the
# part spent waiting for the kubelet and API server, from its "is healthy after" lines), QEMU start -> the
# first of them starting, QEMU start -> done (the last of them exiting). The serial log has
# seconds since QEMU start per line and the report lines the guest's monotonic clock, which gives
# the offset. Prints every boot, then min/median/max per figure and the ratios (cloud-init's four
# stages / kubestrap's units, medians) against the target 20 (PASS/FAIL), with the load average
# at start and end. Exits 1 only when a boot's timings are missing.
#   test-vm/bench-cloud-init.sh [--no-build]     (as root; env BENCH_BOOTS=3, VM_TIMEOUT=300)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=run.sh disable=SC1091  # followed only with shellcheck -x
. "$HERE/run.sh"   # lib.sh, the user-data, host_control_plane (main does not run when sourced)
VM_TIMEOUT=${VM_TIMEOUT:-300}
BOOTS=${BENCH_BOOTS:-3}
TARGET=20          # cloud-init's four stages / kubestrap's units, at least
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/kubestrap/vm
build=(--test-image)
[ "${1:-}" = --no-build ] && build+=(--no-cargo)
[ "$(id -u)" -eq 0 ] || { echo "bench-cloud-init.sh: run as root" >&2; exit 1; }
[[ $BOOTS =~ ^[1-9][0-9]*$ ]] || { echo "bench-cloud-init.sh: BENCH_BOOTS must be a positive integer" >&2; exit 2; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

# shellcheck disable=SC2034  # read by lib.sh's say
SCENARIO=bench   # lib.sh log prefix
LOAD_START=$(load)
BENCH=$(mktemp -d "${TMPDIR:-/tmp}/kubestrap-bench.XXXXXX")
BENCH_NS="kubestrap-bench-$$"
cleanup() { ip netns del "$BENCH_NS" 2>/dev/null || true; rm -rf "$BENCH"; }
trap cleanup EXIT

# Both images (the cloud-init one is cached separately: its package set is part of the key).
# shellcheck disable=SC1090
. "$("$REPO/image/build.sh" "${build[@]}" | tail -n1)"
KS_ROOTFS=$IMAGE_ROOTFS KS_KERNEL=$IMAGE_KERNEL KS_INITRD=$IMAGE_INITRD
# shellcheck disable=SC1090
. "$(KUBESTRAP_EXTRA_PACKAGES=cloud-init "$REPO/image/build.sh" --test-image --no-cargo --out "$CACHE/image-cloud-init" | tail -n1)"
CI_ROOTFS=$IMAGE_ROOTFS CI_KERNEL=$IMAGE_KERNEL CI_INITRD=$IMAGE_INITRD

# The control-plane and cloud-init guests run in a network namespace holding only lo, so
# nothing they send leaves the machine (the worker's namespace is host_control_plane's).
ip netns add "$BENCH_NS"
ip -n "$BENCH_NS" link set lo up
mkdir -p "$BENCH/cp" "$BENCH/ci"
cp_user_data >"$BENCH/cp/user-data"
printf 'instance-id: iid-bench-cp\nlocal-hostname: cp-1\n' >"$BENCH/cp/meta-data"
make_seed "$BENCH/cp.iso" "$BENCH/cp"
printf '#cloud-config\nhostname: bench\n' >"$BENCH/ci/user-data"
printf 'instance-id: iid-bench-ci\nlocal-hostname: bench\n' >"$BENCH/ci/meta-data"
make_seed "$BENCH/ci.iso" "$BENCH/ci"
TIMELINE=kubestrap.test.timeline=1   # the report unit also prints when the units it waits for ran

# figures LOG PATTERN COUNT: "<run s> <QEMU start -> first start s> <QEMU start -> done s>" from
# the report lines matching PATTERN (COUNT units, each started and exited), or nothing.
figures() {
    awk -v pat="$2" -v want="$3" 'index($0, pat) {
        s = ""; e = "";
        for (i = 1; i <= NF; i++) { if ($i ~ /^start_us=/) s = substr($i, 10); if ($i ~ /^exit_us=/) e = substr($i, 9) }
        if (s + 0 <= 0 || e + 0 < s + 0) next
        n++; run += e - s
        if (first == "" || s + 0 < first) first = s + 0
        if (e + 0 > last) last = e + 0
        if (off == "" && match($0, /\[ *[0-9]+\.[0-9]+\]/)) off = $1 - substr($0, RSTART + 1, RLENGTH - 2)
    } END { if (n == want && off != "") printf "%.2f %.2f %.2f\n", run / 1e6, off + first / 1e6, off + last / 1e6 }' "$1"
}

# timeline LOG: the units on the way, as seconds since QEMU start (start -> active).
timeline() {
    awk 'index($0, "KUBESTRAP-TEST timeline unit=") && match($0, /\[ *[0-9]+\.[0-9]+\]/) {
        off = $1 - substr($0, RSTART + 1, RLENGTH - 2); u = ""; s = 0; a = 0
        for (i = 1; i <= NF; i++) { if ($i ~ /^unit=/) u = substr($i, 6); if ($i ~ /^start_us=/) s = substr($i, 10); if ($i ~ /^active_us=/) a = substr($i, 11) }
        printf "    %-38s %7s -> %7s\n", u, (s > 0 ? sprintf("%.2f", off + s / 1e6) : "-"), (a > 0 ? sprintf("%.2f", off + a / 1e6) : "-")
    }' "$1"
}

# waited LOG: seconds kubestrap's post-kubelet unit spent waiting for the kubelet and the API
# server to answer (its "is healthy after" lines), or nothing.
waited() {
    awk '/(kubelet|API server) is healthy after / {
        v = $NF; m = 1
        if (v ~ /ms$/) m = 1e-3; else if (v ~ /µs$/) m = 1e-6; else if (v ~ /ns$/) m = 1e-9
        gsub(/[^0-9.]/, "", v); w += v * m; n++
    } END { if (n) printf "%.2f\n", w }' "$1"
}

ROWS=() MISSING=()
declare -A VALS TIMELINES   # VALS[kind.figure] = space-separated values, one per boot
record() {   # record KIND I LOG PATTERN COUNT RC WANT_RC
    local kind=$1 i=$2 log=$3 f l run first fin
    l=$(load)
    f=$(figures "$log" "$4" "$5")
    if [ -z "$f" ] || { [ -n "$7" ] && [ "$6" != "$7" ]; }; then
        MISSING+=("$kind #$i (QEMU rc=$6; log: $ARTIFACTS/bench/$(basename "$log"))")
        ROWS+=("$(printf '%-12s %2d  %-14s %s' "$kind" "$i" "$l" "timings missing (QEMU rc=$6)")")
        return 0
    fi
    read -r run first fin <<<"$f"
    VALS[$kind.run]+="$run " VALS[$kind.first]+="$first " VALS[$kind.done]+="$fin "
    local w
    w=$(waited "$log")
    if [ -n "$w" ]; then
        VALS[$kind.wait]+="$w " VALS[$kind.own]+="$(awk -v r="$run" -v w="$w" 'BEGIN { printf "%.2f", r - w }') "
    fi
    ROWS+=("$(printf '%-12s %2d  %-14s %8s %12s %12s' "$kind" "$i" "$l" "$run" "$first" "$fin")")
    TIMELINES[$kind]=$log
}

boot_cp() {   # boot_cp I
    local rc=0
    IMAGE_KERNEL=$KS_KERNEL IMAGE_INITRD=$KS_INITRD
    boot_vm "cp-$1" "$KS_ROOTFS" --snapshot --seed "$BENCH/cp.iso" --netns "$BENCH_NS" \
        --append "$TIMELINE" || rc=$?
    record control-plane "$1" "$BENCH/cp-$1.serial.log" "KUBESTRAP-TEST unit=kubestrap" 2 "$rc" 1
}

boot_worker() {   # boot_worker I: a fresh host control plane per boot, as worker-join
    local rc=0 c
    # shellcheck disable=SC2034  # FAILURES: lib.sh's fail appends to it
    WORK="$BENCH/w$1" FAILURES=() CLEANUPS=()
    mkdir -p "$WORK/seed"
    if host_control_plane; then
        worker_user_data 1 >"$WORK/seed/user-data"
        printf 'instance-id: iid-bench-worker-%s\nlocal-hostname: worker-1\n' "$1" >"$WORK/seed/meta-data"
        make_seed "$WORK/seed.iso" "$WORK/seed"
        IMAGE_KERNEL=$KS_KERNEL IMAGE_INITRD=$KS_INITRD
        boot_vm "worker-$1" "$KS_ROOTFS" --snapshot --seed "$WORK/seed.iso" --netns "$NS" \
            --append "$TIMELINE" || rc=$?
    else
        rc=host-init-failed
        : >"$WORK/worker-$1.serial.log"
    fi
    for c in "${CLEANUPS[@]}"; do eval "$c" || true; done
    cp "$WORK/worker-$1.serial.log" "$BENCH/"
    [ -f "$WORK/host-double.log" ] && cp "$WORK/host-double.log" "$BENCH/worker-$1.host-double.log"
    WORK=$BENCH
    record worker "$1" "$BENCH/worker-$1.serial.log" "KUBESTRAP-TEST unit=kubestrap" 2 "$rc" 1
}

boot_ci() {   # boot_ci I
    local rc=0
    IMAGE_KERNEL=$CI_KERNEL IMAGE_INITRD=$CI_INITRD
    boot_vm "cloud-init-$1" "$CI_ROOTFS" --snapshot --seed "$BENCH/ci.iso" --netns "$BENCH_NS" \
        --append "systemd.mask=kubestrap.service systemd.mask=kubestrap-post.service $TIMELINE" || rc=$?
    # kubestrap is masked, so the report unit's verdict is "fail" (rc 3); only timeouts matter.
    case "$rc" in 124|137) rc="$rc (timed out)" ;; esac
    record cloud-init "$1" "$BENCH/cloud-init-$1.serial.log" "KUBESTRAP-TEST cloud-init unit=" 4 "$rc" ""
}

WORK=$BENCH
for ((i = 1; i <= BOOTS; i++)); do
    boot_cp "$i"
    boot_worker "$i"
    boot_ci "$i"
done
LOAD_END=$(load)
mkdir -p "$ARTIFACTS/bench"
cp "$BENCH"/*.log "$ARTIFACTS/bench/"

stats() {   # stats "v1 v2 ...": "min median max"
    tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -n | awk '{ v[NR] = $1 } END {
        if (NR == 0) { print "- - -"; exit }
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.2f %.2f %.2f\n", v[1], m, v[NR] }'
}
median() { stats "$1" | cut -d' ' -f2; }

echo "==== kubestrap vs cloud-init, first boot under QEMU (accel=$VM_ACCEL, $BOOTS boot(s) each, interleaved) ===="
echo "load average at start: $LOAD_START"
printf '%-12s %2s  %-14s %8s %12s %12s\n' boot '#' 'load (1/5/15)' 'units s' 'qemu->start' 'qemu->done'
printf '%s\n' "${ROWS[@]}"
echo "---- min / median / max (s) ----"
for kind in control-plane worker cloud-init; do
    units="kubestrap.service + kubestrap-post.service"
    [ "$kind" = cloud-init ] && units="cloud-init's four stages"
    printf '%-14s %-52s %s\n' "$kind" "units ($units)" "$(stats "${VALS[$kind.run]:-}")"
    if [ -n "${VALS[$kind.wait]:-}" ]; then
        printf '%-14s %-52s %s\n' "$kind" "  of which waiting for the kubelet + API server" "$(stats "${VALS[$kind.wait]}")"
        printf '%-14s %-52s %s\n' "$kind" "  kubestrap's own (units minus those waits)" "$(stats "${VALS[$kind.own]}")"
    fi
    printf '%-14s %-52s %s\n' "$kind" "QEMU start -> first unit starts" "$(stats "${VALS[$kind.first]:-}")"
    printf '%-14s %-52s %s\n' "$kind" "QEMU start -> done (last unit exits)" "$(stats "${VALS[$kind.done]:-}")"
done
echo "---- ratio: cloud-init's four stages / kubestrap's units (medians), target >= $TARGET (kubestrap <= 1/$TARGET) ----"
ci=$(median "${VALS[cloud-init.run]:-}")
for kind in control-plane worker; do
    ks=$(median "${VALS[$kind.run]:-}")
    awk -v k="$ks" -v c="$ci" -v t="$TARGET" -v n="$kind" 'BEGIN {
        if (k + 0 <= 0 || c + 0 <= 0) { printf "%-14s missing timings\n", n; exit }
        r = c / k; printf "%-14s %ss vs %ss: 1/%.1f  %s\n", n, k, c, r, (r >= t ? "PASS" : "FAIL") }'
    # An if, not a && list: a worker has no waits, and a false last command ends the loop
    # with status 1, which set -e turns into the script's exit.
    if [ -n "${VALS[$kind.own]:-}" ]; then
        own=$(median "${VALS[$kind.own]}")
        awk -v k="$own" -v c="$ci" -v n="$kind" 'BEGIN {
            if (k + 0 > 0 && c + 0 > 0) printf "%-14s (kubestrap own work %ss: 1/%.1f; the rest is the image waiting for its kubelet and API server)\n", n, k, c / k }'
    fi
done
for kind in control-plane worker cloud-init; do
    [ -n "${TIMELINES[$kind]:-}" ] || continue
    echo "---- $kind, last boot: units on the way (s since QEMU start: left inactive -> active) ----"
    timeline "${TIMELINES[$kind]}"
done
echo "load average at end: $LOAD_END"
echo "serial logs: $ARTIFACTS/bench/"
if [ "${#MISSING[@]}" -gt 0 ]; then
    printf 'bench: missing timings: %s\n' "${MISSING[@]}" >&2
    exit 1
fi
