#!/usr/bin/env bash
# Benchmark (optional, not part of run-all; issue #20 item 4): the user-facing first-boot numbers,
# kubestrap vs the real kubeadm v1.37.2 driven by Debian's cloud-init (the incumbent, unchanged),
# on one image (the preloaded test image plus cloud-init) with the same preloaded images. Per
# round (BENCH_BOOTS, default 3; interleaved so load drift hits both alike):
#   control plane: power-on -> API serving (the console's "[control-plane-check] kube-apiserver
#     is healthy", which both print) and power-on -> Node Ready (the report unit's node-ready);
#   worker: power-on -> Node Ready, joining the host's real control plane (host-cp.sh) on a
#     private LAN, up for the whole bench;
# plus each tool's own unit time (kubestrap.service + kubestrap-post.service; cloud-init's four
# stages). Then min/median/max per figure, and the last round's timelines side by side
# (bench-timeline.py). The other tool's units are masked in each boot.
#   test-vm/bench-cloud-init.sh [--no-build]     (as root; env BENCH_BOOTS=3, VM_TIMEOUT=900,
#   BENCH_KINDS="control-plane worker": which rounds to run; BENCH_TOOLS="kubestrap kubeadm": which
#   tools boot, one alone to try a change)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=run.sh disable=SC1091  # followed only with shellcheck -x
. "$HERE/run.sh"   # lib.sh, the user-data, the LAN helpers (main does not run when sourced)
# Not BOOTS: lib.sh counts every boot_vm in BOOTS (for the scenarios' table).
ROUNDS=${BENCH_BOOTS:-3}
KINDS=${BENCH_KINDS:-control-plane worker}
TOOLS=${BENCH_TOOLS:-kubestrap kubeadm}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/kubestrap/vm
build=(--preloaded)
[ "${1:-}" = --no-build ] && build+=(--no-cargo)
[ "$(id -u)" -eq 0 ] || { echo "bench-cloud-init.sh: run as root" >&2; exit 1; }
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "bench-cloud-init.sh: BENCH_BOOTS must be a positive integer" >&2; exit 2; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

# shellcheck disable=SC2034  # read by lib.sh's say and fail
SCENARIO=bench FAILURES=() CLEANUPS=()
LOAD_START=$(load)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kubestrap-bench.XXXXXX")
# The serial logs are kept (in artifacts/bench) even when the bench is stopped part-way.
trap 'for c in "${CLEANUPS[@]}"; do eval "$c" || true; done; mkdir -p "$ARTIFACTS/bench"
    cp "$WORK"/*.serial.log "$ARTIFACTS/bench/" 2>/dev/null; rm -rf "$WORK"' EXIT

# The preloaded test image with Debian's cloud-init (cached on its own: the package set is in the key).
"$REPO/image/build.sh" "${build[@]}" >/dev/null
# shellcheck disable=SC1090
. "$(KUBESTRAP_EXTRA_PACKAGES=cloud-init "$REPO/image/build.sh" --preloaded --no-cargo --out "$CACHE/image-cloud-init" | tail -n1)"
# A node whose tool failed is not waited for past this; the figures are API serving and Node
# Ready, so the report unit does not wait for Pods (an init that failed before its addons has none).
WAIT="kubestrap.test.ready-timeout=420 kubestrap.test.pods=0 kubestrap.test.timeline=1"
KS_MASK="$WAIT systemd.mask=cloud-init-local.service systemd.mask=cloud-init.service systemd.mask=cloud-config.service systemd.mask=cloud-final.service"
# hosts IP NAME: the node's name in its /etc/hosts, for both tools (why: units/test/kubestrap-test-hosts.sh).
hosts() { echo "kubestrap.test.hosts=$1:$2"; }
KA_MASK="$WAIT systemd.mask=kubestrap.service systemd.mask=kubestrap-post.service kubestrap.test.incumbent=1"

# kubeadm's documents for the control plane (run.sh's cp-init user-data); for cloud-init they are
# a file that runcmd hands to `kubeadm init`, as Cluster API's bootstrap data does.
cloud_init_user_data() {   # cloud_init_user_data FILE KUBEADM-ARGS: documents from FILE
    printf '#cloud-config\nwrite_files:\n- path: /run/kubeadm/kubeadm.yaml\n  permissions: "0600"\n  content: |\n'
    sed 's/^/    /' "$1"
    printf 'runcmd:\n- kubeadm %s --config /run/kubeadm/kubeadm.yaml\n' "$2"
}

# at LOG: "<QEMU start -> API serving s> <QEMU start -> Node Ready s>" (or "-"). Node Ready is
# when the kubelet posted it (the condition's lastTransitionTime, to the second), where the
# report gave it, not when the report's poll first saw it: that poll starts only after the
# tools' units end.
at() {
    awk 'match($0, /\[ *[0-9]+\.[0-9]+\]/) { off = $1 - substr($0, RSTART + 1, RLENGTH - 2) }
        /\[control-plane-check\] kube-apiserver is healthy/ && api == "" { api = $1 }
        /KUBESTRAP-TEST node-ready / { for (i = 1; i <= NF; i++) if ($i ~ /^at_us=/ && ready == "") ready = off + substr($i, 7) / 1e6
            for (i = 1; i <= NF; i++) if ($i ~ /^since_us=/) ready = off + substr($i, 10) / 1e6 }
        END { printf "%s %s\n", (api == "" ? "-" : sprintf("%.1f", api)), (ready == "" ? "-" : sprintf("%.1f", ready)) }' "$1"
}
# units LOG PATTERN: the units' summed run time (s) from the report's start_us/exit_us lines.
units() {
    awk -v pat="$2" 'index($0, pat) { s = ""; e = ""
        for (i = 1; i <= NF; i++) { if ($i ~ /^start_us=/) s = substr($i, 10); if ($i ~ /^exit_us=/) e = substr($i, 9) }
        if (s + 0 > 0 && e + 0 >= s + 0) run += e - s } END { if (run > 0) printf "%.1f\n", run / 1e6; else print "-" }' "$1"
}

declare -A VALS
ROWS=()
record() {   # record KIND TOOL I LOG
    local api ready u
    read -r api ready <<<"$(at "$4")"
    if [ "$2" = kubestrap ]; then u=$(units "$4" "KUBESTRAP-TEST unit=kubestrap"); else u=$(units "$4" "KUBESTRAP-TEST cloud-init unit="); fi
    [ "$1" = worker ] && api=-
    local note=""
    grep -qE 'unit=(kubestrap|kubestrap-post|cloud-final)\.service .*result=exit-code' "$4" && note="  (the tool failed: see its log)"
    grep -q 'KUBESTRAP-TEST hosts ' "$4" || note+="  (its name was not in /etc/hosts)"
    ROWS+=("$(printf '%-14s %-10s %2d  %-14s %10s %10s %8s%s' "$1" "$2" "$3" "$(load)" "$api" "$ready" "$u" "$note")")
    [ "$api" = - ] || VALS[$1.$2.api]+="$api "
    [ "$ready" = - ] || VALS[$1.$2.ready]+="$ready "
    [ "$u" = - ] || VALS[$1.$2.units]+="$u "
}

boot_cp() {   # boot_cp TOOL I
    local d="$WORK/cp-$1-$2" rc=0 mask=$KS_MASK
    mkdir -p "$d"
    # Both tools get the user-data's timeouts: kubeadm's default kubernetesAPICall (1m) ends its
    # init under TCG before the API server's RBAC is up ("could not bootstrap the admin user").
    cp_user_data >"$d/docs.yaml"
    grep -q '^  kubernetesAPICall: 5m0s$' "$d/docs.yaml" || { echo "bench: timeouts not set" >&2; exit 1; }
    if [ "$1" = kubestrap ]; then cp "$d/docs.yaml" "$d/user-data"; else cloud_init_user_data "$d/docs.yaml" init >"$d/user-data"; mask=$KA_MASK; fi
    printf 'instance-id: iid-bench-cp-%s-%s\nlocal-hostname: cp-1\n' "$1" "$2" >"$d/meta-data"
    make_seed "$d.iso" "$d"
    boot_vm "cp-$1-$2" "$IMAGE_ROOTFS" --snapshot --seed "$d.iso" --append "$mask $(hosts 10.0.2.15 cp-1)" || rc=$?
    [ "$rc" = 1 ] || say "cp $1 #$2: QEMU rc=$rc (1 = Node Ready and Pods running)"
    record control-plane "$1" "$2" "$WORK/cp-$1-$2.serial.log"
}

boot_worker() {   # boot_worker TOOL I: joins the LAN's control plane
    local code=ks
    [ "$1" = kubeadm ] && code=ka
    local n="w-$code-$2" d rc=0 mask=$KS_MASK octet=21 tap="tap-$code-$2"
    d="$WORK/$n"
    mkdir -p "$d"
    lan_join_docs "$n" | sed 's/10\.10\.0\.11:6443/10.10.0.1:6443/' >"$d/docs.yaml"
    grep -q '10.10.0.1:6443' "$d/docs.yaml" || { echo "bench: the worker's endpoint was not rewritten" >&2; exit 1; }
    if [ "$1" = kubestrap ]; then cp "$d/docs.yaml" "$d/user-data"; else
        cloud_init_user_data "$d/docs.yaml" join >"$d/user-data"
        mask=$KA_MASK
        # cloud-init's fallback network config (DHCP on the NIC) outranks the image's static LAN
        # .network file, and the LAN has no DHCP: tell it the same static address (Debian 12's
        # cloud-init 22.4 refuses `to: default` in a route: "Address default is not a valid ip").
        printf 'version: 2\nethernets:\n  lan:\n    match: {macaddress: "52:54:00:0a:0a:%02x"}\n    addresses: [10.10.0.%d/24]\n    routes: [{to: 0.0.0.0/0, via: 10.10.0.1}]\n' \
            "$octet" "$octet" >"$d/network-config"
    fi
    printf 'instance-id: iid-bench-%s\nlocal-hostname: %s\n' "$n" "$n" >"$d/meta-data"
    make_seed "$d.iso" "$d"
    ip -n "$NS" tuntap add dev "$tap" mode tap
    ip -n "$NS" link set "$tap" master br0 up
    boot_vm "$n" "$IMAGE_ROOTFS" --snapshot --seed "$d.iso" --netns "$NS" \
        --tap "$tap" "$(printf '52:54:00:0a:0a:%02x' "$octet")" --append "$mask $(hosts "10.10.0.$octet" "$n")" || rc=$?
    ip -n "$NS" link del "$tap" 2>/dev/null || true
    [ "$rc" = 1 ] || say "worker $1 #$2: QEMU rc=$rc (1 = Node Ready)"
    record worker "$1" "$2" "$WORK/$n.serial.log"
}

run_kind() { [[ " $KINDS " == *" $1 "* ]]; }
run_tool() { [[ " $TOOLS " == *" $1 "* ]]; }
for ((i = 1; i <= ROUNDS; i++)); do
    run_kind control-plane || break
    for t in kubestrap kubeadm; do run_tool "$t" && boot_cp "$t" "$i"; done
done

# The control plane the workers join: the host's real one on the LAN (host-cp.sh, as the
# workers scenario's), up for the whole bench. A control-plane VM beside each worker shared two
# cores between two TCG guests: its API server stopped answering within minutes and one tool's
# join waited out its discovery timeout.
run_kind worker && {
HOST_K8S_BIN=$("$REPO/scripts/real-k8s" | tail -n1)
lan_up
lan_ca
mkdir -p "$WORK/cp/etc/kubernetes/pki"
cp "$WORK/ca/etc/kubernetes/pki/ca.crt" "$WORK/ca/etc/kubernetes/pki/ca.key" "$WORK/cp/etc/kubernetes/pki/"
render "$SCN/workers/host-cp.yaml" >"$WORK/host-cp.yaml"
host_cp_init "$NS" "$WORK/cp" "$WORK/host-cp.yaml" || { echo "bench: the host control plane did not start (host-init.log)" >&2; exit 1; }
for ((i = 1; i <= ROUNDS; i++)); do
    for t in kubestrap kubeadm; do run_tool "$t" && boot_worker "$t" "$i"; done
done
# Every worker's CSR and Node as the control plane saw them (a worker that did not get Ready
# shows here whether its kubelet asked and what became of it).
host_kubectl get csr 2>&1 | sed 's/^/bench csr /'
host_kubectl get nodes -o wide 2>&1 | sed 's/^/bench node /'
}
LOAD_END=$(load)

stats() {   # stats "v1 v2 ...": "min median max"
    tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -n | awk '{ v[NR] = $1 } END {
        if (NR == 0) { print "-"; exit }
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.1f (%.1f-%.1f)\n", m, v[1], v[NR] }'
}
echo "==== first boot to a working node: kubestrap vs kubeadm v1.37.2 driven by cloud-init ($ROUNDS round(s), accel=$VM_ACCEL) ===="
echo "load average at start: $LOAD_START"
printf '%-14s %-10s %2s  %-14s %10s %10s %8s\n' node tool '#' 'load (1/5/15)' 'API s' 'Ready s' 'units s'
printf '%s\n' "${ROWS[@]}"
echo "---- medians (min-max), seconds since power-on (QEMU start) ----"
for kind in $KINDS; do
    for tool in $TOOLS; do
        printf '%-14s %-10s API serving %-18s Node Ready %-18s own units %s\n' "$kind" "$tool" \
            "$(stats "${VALS[$kind.$tool.api]:-}")" "$(stats "${VALS[$kind.$tool.ready]:-}")" "$(stats "${VALS[$kind.$tool.units]:-}")"
    done
done
echo "load average at end: $LOAD_END"
# The last round's boots, phase by phase (bench-timeline.py: systemd's units, kubestrap's
# status.json timeline, cloud-init's stages and kubeadm's phases, seconds since power-on).
for kind in $KINDS; do
    case $kind in
        control-plane) ks="$WORK/cp-kubestrap-$ROUNDS.serial.log" ka="$WORK/cp-kubeadm-$ROUNDS.serial.log" ;;
        worker) ks="$WORK/w-ks-$ROUNDS.serial.log" ka="$WORK/w-ka-$ROUNDS.serial.log" ;;
    esac
    echo "---- $kind, round $ROUNDS: timelines (s since power-on) ----"
    [ "$TOOLS" = "kubestrap kubeadm" ] || { echo "(one tool: no side-by-side timeline)"; continue; }
    python3 "$HERE/bench-timeline.py" "$ks" "$ka" || echo "bench: no timeline for $kind" >&2
done
echo "serial logs: $ARTIFACTS/bench/"
missing=0
for kind in $KINDS; do
    for tool in $TOOLS; do
        [ "$(wc -w <<<"${VALS[$kind.$tool.ready]:-}")" = "$ROUNDS" ] || { echo "bench: $kind/$tool: a boot has no Node Ready time" >&2; missing=1; }
    done
done
exit "$missing"
