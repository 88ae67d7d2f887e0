#!/usr/bin/env bash
# Benchmark (optional, not part of run-all): kubestrap's first-boot unit time vs Debian's
# cloud-init on the same image. Boot 1: the test image, control-plane user-data, kubestrap's
# two units. Boot 2: the same recipe plus cloud-init (KUBESTRAP_EXTRA_PACKAGES=cloud-init),
# trivial #cloud-config, kubestrap's units masked. Prints both and the ratio
# (kubestrap.service + kubestrap-post.service) / (cloud-init-local + cloud-init + cloud-config
# + cloud-final), each measured as the unit's main process run time from systemd's timestamps.
#   test-vm/bench-cloud-init.sh [--no-build]     (as root)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
VM_TIMEOUT=${VM_TIMEOUT:-300}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/kubestrap/vm
build=(--test-image)
[ "${1:-}" = --no-build ] && build+=(--no-cargo)

secs() {   # secs LOG PATTERN: summed main-process run time of the matching report lines
    awk -v pat="$2" 'index($0, pat) {
        s = ""; e = "";
        for (i = 1; i <= NF; i++) { if ($i ~ /^start_us=/) s = substr($i, 10); if ($i ~ /^exit_us=/) e = substr($i, 9) }
        if (s != "" && e != "" && e + 0 >= s + 0) t += e - s } END { printf "%.2f", t / 1e6 }' "$1"
}

export SCENARIO=bench   # lib.sh log prefix
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kubestrap-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/seed"

# 1. kubestrap, control-plane init (the cp-init user-data of run.sh).
# shellcheck disable=SC1090
. "$("$REPO/image/build.sh" "${build[@]}" | tail -n1)"
sed -n '/^cp_user_data() {/,/^}/p' "$HERE/run.sh" >"$WORK/cp.sh"
TOKEN=abcdef.0123456789abcdef   # used by cp_user_data
export TOKEN
# shellcheck disable=SC1091
. "$WORK/cp.sh"
cp_user_data >"$WORK/seed/user-data"
printf 'instance-id: iid-bench\nlocal-hostname: cp-1\n' >"$WORK/seed/meta-data"
make_seed "$WORK/ks.iso" "$WORK/seed"
boot_vm kubestrap "$IMAGE_ROOTFS" --snapshot --seed "$WORK/ks.iso" || true
ks=$(secs "$WORK/kubestrap.serial.log" "KUBESTRAP-TEST unit=kubestrap")

# 2. cloud-init with trivial user-data, kubestrap masked.
# shellcheck disable=SC1090
. "$(KUBESTRAP_EXTRA_PACKAGES=cloud-init "$REPO/image/build.sh" --test-image --no-cargo --out "$CACHE/image-cloud-init" | tail -n1)"
printf '#cloud-config\nhostname: bench\n' >"$WORK/seed/user-data"
printf 'instance-id: iid-bench-ci\nlocal-hostname: bench\n' >"$WORK/seed/meta-data"
make_seed "$WORK/ci.iso" "$WORK/seed"
boot_vm cloud-init "$IMAGE_ROOTFS" --snapshot --seed "$WORK/ci.iso" \
    --append "systemd.mask=kubestrap.service systemd.mask=kubestrap-post.service" || true
ci=$(secs "$WORK/cloud-init.serial.log" "KUBESTRAP-TEST cloud-init unit=")

mkdir -p "$ARTIFACTS/bench"
cp "$WORK"/*.serial.log "$ARTIFACTS/bench/"
grep -h 'KUBESTRAP-TEST .*unit=' "$WORK"/*.serial.log | sed 's/^ *[0-9.]* \[ *[0-9.]*\] [^:]*: //'
if awk -v k="$ks" -v c="$ci" 'BEGIN { exit !(k > 0 && c > 0) }'; then
    echo "kubestrap units: ${ks}s; cloud-init's four stages: ${ci}s; ratio 1/$(awk -v k="$ks" -v c="$ci" 'BEGIN { printf "%.1f", c / k }')"
else
    echo "bench: missing timings (kubestrap=${ks}s cloud-init=${ci}s); logs in $ARTIFACTS/bench" >&2
    exit 1
fi
