#!/usr/bin/env bash
# Boot the kubestrap test image under QEMU (TCG) and assert on the serial console.
#
#   test-vm/run.sh [--no-build] SCENARIO...     (SCENARIO: all, or see `run.sh --list`)
#
# Builds/reuses the test image (image/build.sh --test-image; --no-build skips cargo), then runs
# each scenario; exit 0 only if all pass. Serial logs, status.json and host-side logs of a failed
# scenario go to test-vm/artifacts/<scenario>/ (KEEP_ARTIFACTS=1 keeps them for passes too).
# Env: VM_ACCEL=tcg|kvm, VM_TIMEOUT=600 (s per boot at most), VM_MEM=3G, VM_SMP=2, VM_APPEND
# (more kernel command line), VM_CACHE (QEMU disk cache), VM_BUDGET_S / VM_HARD_S (budget.sh and
# the guard below). Inputs live in scenarios/ (see its README), expected times in budget.tsv.
# Needs root (network namespaces, image build).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
# shellcheck source=host-cp.sh
. "$HERE/host-cp.sh"

# Cheapest first: the longest (cp-lifecycle) cannot crowd out the others' verdicts.
SCENARIOS=(no-images token-credential broken-user-data workers capi-cp-init ignition-cp-init power-cuts cp-lifecycle)
# Not in `all`: on the real components under TCG on a 2-core host, a joining control plane's API
# server did not get healthy within kubeadm's 240 s while the first one ran (session 9); run it
# by name (`run.sh ha-control-plane`) on a machine with more cores or KVM.
EXTRA_SCENARIOS=(ha-control-plane)
AB_OLD=v1.36.3   # the previous version: the image cp-lifecycle and workers upgrade from (by image)
SCN="$HERE/scenarios"
TOKEN=abcdef.0123456789abcdef
TOKEN_SECRET=0123456789abcdef
API_PORT=16443        # token-credential's host API server port, inside the scenario's own network namespace
VM_HARD_S=${VM_HARD_S:-3300}   # no scenario starts that would end the suite past this
# VM_DEADLINE (epoch seconds, .ci/run's): nor one that would end past it. A scenario named in
# VM_DEFERRABLE (the lane's rotation) that the guards skip is DEFER, not FAIL: it runs at a later landing.

# ---- user-data (scenarios/) -------------------------------------------------------------
cp_user_data() { render "$SCN/control-plane/user-data"; }
cp_meta_data() { printf 'instance-id: iid-%s\nlocal-hostname: cp-1\n' "$SCENARIO"; }

# KUBESTRAP-EVENT lines: the JSON keys may come in any order, so match key/value pairs.
# event_re EVENT [STAGE [PHASE]]: an ERE for such a line (of that stage and phase when both are given).
event_re() {
    local re='KUBESTRAP-EVENT .*"event":"'$1'"'
    [ -n "${2:-}" ] && re="$re"'.*"stage":"'$2'"'
    [ -n "${3:-}" ] && re='KUBESTRAP-EVENT .*"event":"'$1'".*"phase":"'$3'"'
    [ -n "${3:-}" ] && [ -n "${2:-}" ] && re="$re"'.*"stage":"'$2'"'
    echo "$re"
}
# event_at LOG EVENT STAGE: seconds since QEMU start of that event (awk: order-agnostic).
event_at() {
    awk -v e="\"event\":\"$2\"" -v s="\"stage\":\"$3\"" \
        'index($0, "KUBESTRAP-EVENT") && index($0, e) && index($0, s) { print $1; exit }' "$1"
}
expect_event() {   # expect_event LOG EVENT STAGE
    if [ -n "$(event_at "$1" "$2" "$3")" ]; then say "ok: $2 event of $3 at $(event_at "$1" "$2" "$3") s"
    else fail "no \"$2\" event from the $3 stage"; fi
}
unit_field() {     # unit_field LOG UNIT FIELD: from the report unit's KUBESTRAP-TEST unit= line
    sed -n "s/.*KUBESTRAP-TEST unit=$2 .*[ ]$3=\\([^ ]*\\).*/\\1/p" "$1" | tail -n1
}
unit_secs() {      # unit_secs LOG UNIT: how long the unit's main process ran
    local a b
    a=$(unit_field "$1" "$2" start_us) b=$(unit_field "$1" "$2" exit_us)
    if [ -n "$a" ] && [ -n "$b" ] && [ "$b" -ge "$a" ]; then awk -v d="$((b - a))" 'BEGIN { printf "%.2f", d / 1e6 }'; fi
}
expect_no_secret() {
    reject_line "$1" "$TOKEN_SECRET" "the token secret never appears on the console"
}
note_timing() {    # note_timing LOG LABEL: record QEMU start -> post-kubelet done
    local t k
    t=$(event_at "$1" "done" post-kubelet)
    [ -n "$t" ] || return 0
    # The console line carries the guest kernel's timestamp: "[   15.73] kubestrap[1]: ...".
    k=$(awk -v s='"stage":"post-kubelet"' 'index($0, "KUBESTRAP-EVENT") && index($0, "\"event\":\"done\"") && index($0, s) {
        if (match($0, /\[ *[0-9]+\.[0-9]+\]/)) { v = substr($0, RSTART + 1, RLENGTH - 2); gsub(/ /, "", v); print v; exit } }' "$1")
    say "TIMING $2: kubestrap done (post-kubelet) at ${t}s after QEMU start, ${k:-?}s after kernel start; kubestrap.service ran $(unit_secs "$1" kubestrap.service)s, kubestrap-post.service $(unit_secs "$1" kubestrap-post.service)s"
    SCENARIO_NOTE="${SCENARIO_NOTE:+$SCENARIO_NOTE; }done at ${t}s"
    printf '%-18s %-16s qemu->done %7ss  kernel->done %7ss  units %ss + %ss\n' "$SCENARIO" "$2" "$t" "${k:-?}" \
        "$(unit_secs "$1" kubestrap.service)" "$(unit_secs "$1" kubestrap-post.service)" >>"$TIMINGS_FILE"
}

fresh_disk() {     # fresh_disk NAME [IMAGE]: a persistent (non-snapshot) copy of the image
    cp --sparse=always "${2:-$IMAGE_ROOTFS}" "$WORK/$1.ext4"
    echo "$WORK/$1.ext4"
}

seed_iso() {       # seed_iso: $WORK/seed/{user-data,meta-data} -> $WORK/seed.iso
    make_seed "$WORK/seed.iso" "$WORK/seed"
    cp "$WORK/seed/user-data" "$WORK/user-data.yaml"
}

# ---- control plane ------------------------------------------------------------------------
# check_cp_boot LOG RC [pre-skipped] [no-pods]: a control-plane init that went all the way (its
# endpoint $CP_ENDPOINT); no-pods: the boot ran with kubestrap.test.pods=0.
CP_ENDPOINT=10.0.2.15:6443
check_cp_boot() {
    local log=$1 rc=$2 st p phases=(wait-control-plane upload-config mark-control-plane bootstrap-token addon/coredns addon/kube-proxy)
    expect_rc "$rc" 1 "the report unit saw both kubestrap units succeed"
    if [[ " ${*:3} " == *" pre-skipped "* ]]; then
        expect_event "$log" skipped pre-kubelet
    else
        expect_event "$log" "done" pre-kubelet
        phases=(certs kubeconfig etcd control-plane kubelet-start "${phases[@]}")
    fi
    expect_event "$log" "done" post-kubelet
    reject_line "$log" "$(event_re error)" "no error event"
    for p in "${phases[@]}"; do
        has_line "$log" "$(event_re phase "" "$p")" || fail "no phase event for $p"
    done
    expect_line "$log" "kubestrap join ${CP_ENDPOINT//./\\.} --token $TOKEN" "the console shows the join command"
    expect_line "$log" "--discovery-token-ca-cert-hash sha256:[0-9a-f]{64}" "the join command carries the CA pin"
    expect_status "$log" state "done" "the node is done"
    # The real node: the kubelet ran kubestrap's static Pods and the addons.
    expect_line "$log" 'KUBESTRAP-TEST node-ready name=cp-1 ' "the Node is Ready (the real kubelet, as the API server reports it)"
    [[ " ${*:3} " == *" no-pods "* ]] || expect_line "$log" 'KUBESTRAP-TEST pods-running ' "CoreDNS and kube-proxy Pods are Running"
    # Its mirror Pod Running, from the list that API server itself served; not necessarily Ready at
    # that instant: under a slow TCG host its liveness probe may have just restarted it.
    expect_line "$log" 'KUBESTRAP-TEST pods kube-system +kube-apiserver-cp-1 +[01]/1 +Running' "the API server runs as a static Pod from kubestrap's manifest"
}

# ---- worker join against a control plane on the host -------------------------------------
# A private network namespace holds the host side: lo with 127.0.0.1 and 10.0.2.2 (the address
# the guest uses for the host under QEMU user networking), a real control plane (host-cp.sh) on
# :API_PORT, and QEMU itself, so slirp's 10.0.2.2 -> 127.0.0.1 mapping lands on the API server.
# Nothing leaves lo.
host_control_plane() {
    NS="kubestrap-vm-$$-$RANDOM"
    ip netns add "$NS"
    CLEANUPS+=("ip netns del $NS")
    ip -n "$NS" link set lo up
    ip -n "$NS" addr add 10.0.2.2/32 dev lo
    render "$SCN/token-credential/host-init.yaml" >"$WORK/host-init.yaml"
    host_cp_init "$NS" "$WORK/cp" "$WORK/host-init.yaml" || return 1
    CA_HASH=$("$BIN_DIR/kubestrap" certs ca-hash "$WORK/cp/etc/kubernetes/pki/ca.crt")
    say "host: CA pin $CA_HASH"
}

# check_worker LOG RC DISK: the guest joined; the real API server approved its bootstrap CSR; the
# node's client certificate (read from the guest disk) is accepted.
check_worker() {
    local log=$1 rc=$2 disk=$3 pki="$WORK/guest-pki" pem code n
    expect_rc "$rc" 1 "the report unit saw both kubestrap units succeed"
    expect_event "$log" "done" pre-kubelet
    expect_event "$log" "done" post-kubelet
    reject_line "$log" "$(event_re error)" "no error event"
    expect_no_secret "$log"
    n=$(host_signed_csrs)
    [ "$n" = 1 ] && say "ok: the API server has one CSR from system:bootstrap:abcdef, approved and signed" \
        || fail "$n approved CSRs from system:bootstrap:abcdef, want 1"
    mkdir -p "$pki"
    disk_rdump "$disk" /var/lib/kubelet/pki "$pki"
    pem=$(find "$pki" -type f -name 'kubelet-client-2*.pem' | head -n1)
    if [ -z "$pem" ]; then
        fail "no /var/lib/kubelet/pki/kubelet-client-<timestamp>.pem on the guest disk"
        return 0
    fi
    openssl x509 -in "$pem" -noout -subject -issuer -enddate >"$WORK/guest-node-cert.txt" 2>&1 || true
    if grep -q 'CN *= *system:node:worker-1' "$WORK/guest-node-cert.txt" && grep -q 'O *= *system:nodes' "$WORK/guest-node-cert.txt"; then
        say "ok: the issued node certificate is CN=system:node:worker-1, O=system:nodes"
    else
        fail "unexpected node certificate: $(tr '\n' ' ' <"$WORK/guest-node-cert.txt")"
    fi
    disk_exists "$disk" /etc/kubernetes/kubelet.conf || fail "no /etc/kubernetes/kubelet.conf on the guest"
    disk_exists "$disk" /etc/kubernetes/bootstrap-kubelet.conf && fail "bootstrap-kubelet.conf left behind"
    # The Node authorizer lets system:node:worker-1 read its own Node: 200 once its kubelet has
    # registered it, 404 before (the VM may end first); 401/403 would refuse the identity.
    code=$(ip netns exec "$NS" curl -s -o /dev/null -w '%{http_code}' --cacert "$WORK/cp/etc/kubernetes/pki/ca.crt" \
        --cert "$pem" --key "$pem" "https://10.0.2.2:$API_PORT/api/v1/nodes/worker-1" || true)
    case "$code" in
        200|404) say "ok: the API accepts the node's identity (GET its own Node as system:node:worker-1 -> $code)" ;;
        *) fail "the API did not accept the node certificate (HTTP $code)" ;;
    esac
}


scenario_token-credential() {
    host_control_plane || return 0
    mkdir -p "$WORK/seed"
    render "$SCN/token-credential/user-data" >"$WORK/seed/user-data"
    printf 'instance-id: iid-token-credential\nlocal-hostname: worker-1\n' >"$WORK/seed/meta-data"
    seed_iso
    grep -q "$TOKEN_SECRET" "$WORK/seed/user-data" && fail "test bug: the token is in the user-data"
    local disk rc=0
    disk=$(fresh_disk worker)
    # Not waited for Ready (workers proves that). Behind QEMU's user network the kubelet here
    # registers its Node ~20 s after it starts, after its last quick CSINode try: the
    # post-kubelet stage sees that with the kubelet's credentials and restarts it once.
    boot_vm boot1 "$disk" --seed "$WORK/seed.iso" --netns "$NS" --cred "kubestrap.token=$TOKEN" \
        --append kubestrap.test.ready=0 || rc=$?
    check_worker "$WORK/boot1.serial.log" "$rc" "$disk"
    expect_line "$WORK/boot1.serial.log" 'status\.json .*"name": "node registered"' \
        "the post-kubelet stage saw the real kubelet register its Node (status.json's timeline)"
    note_timing "$WORK/boot1.serial.log" token-credential
}

# ---- Cluster API's bootstrap data, unchanged ----------------------------------------------
CAPI_FIXTURES="$REPO/tests/fixtures/user-data"

# check_capi LOG: the kubeadm line was kubestrap's, the commands around it ran in order, and the
# sentinel exists only because the init/join succeeded.
check_capi() { check_console "$1" "$SCN/capi-cp-init/console.tsv"; }

# boot_external_cp DISK: boots a Cluster API control plane (boot1) from $WORK/seed.iso and checks
# both units finished without an error. --cloud-provider=external taints the Node until a cloud
# controller manager initialises it (none here), so CoreDNS stays Pending as in any such cluster:
# the report waits for the Node only.
boot_external_cp() {   # boot_external_cp DISK [KERNEL ARGS]
    local rc=0 log="$WORK/boot1.serial.log"
    boot_vm boot1 "$1" --seed "$WORK/seed.iso" --append "kubestrap.test.pods=0 ${2:-}" || rc=$?
    expect_rc "$rc" 1 "the report unit saw both kubestrap units succeed"
    expect_event "$log" "done" pre-kubelet
    expect_event "$log" "done" post-kubelet
    reject_line "$log" "$(event_re error)" "no error event"
}

scenario_capi-cp-init() {
    mkdir -p "$WORK/seed"
    # The fixture with the version the image carries (it says v1.37.0) and, as CAPI users ship
    # them, kubeadm patches: two files in write_files (patches.write_files: azimuth-cloud's volume
    # by a strategic patch, a flag by a JSON patch) and patches.directory in the InitConfiguration.
    sed 's/kubernetesVersion: v1\.37\.0$/kubernetesVersion: v1.37.2/' \
        "$CAPI_FIXTURES/capi-control-plane-init/user-data" \
        | awk -v f="$SCN/capi-cp-init/patches.write_files" '
            /^-   path: \/run\/kubeadm\/kubeadm.yaml$/ { while ((getline l < f) > 0) print l }
            { print }
            /^        taints: null$/ { print "      patches:"; print "        directory: /etc/kubernetes/patches" }' \
        >"$WORK/seed/user-data"
    grep -q 'directory: /etc/kubernetes/patches' "$WORK/seed/user-data" || { fail "patches.directory was not added"; return 0; }
    cp_meta_data >"$WORK/seed/meta-data"
    seed_iso
    local disk log="$WORK/boot1.serial.log" want got
    disk=$(fresh_disk capi-cp)
    boot_external_cp "$disk" kubestrap.test.verify=1
    check_capi "$log"
    # kubeadm init kept Cluster API's CA (the one in write_files) with its mode.
    want=$(sed -n '/path: \/etc\/kubernetes\/pki\/ca.crt/,/END CERTIFICATE/p' "$WORK/seed/user-data" \
        | sed -n 's/^      //p' | sha256sum)
    got=$(disk_cat "$disk" /etc/kubernetes/pki/ca.crt | sha256sum)
    [ "$want" = "$got" ] && say "ok: the cluster CA is Cluster API's" || fail "ca.crt is not the CA from write_files"
    debugfs -R "stat /etc/kubernetes/pki/ca.crt" "$disk" 2>/dev/null | grep -q 'Mode:  0640' \
        && say "ok: ca.crt keeps CAPI's mode 0640" || fail "ca.crt mode is not 0640"
    local manifest
    manifest=$(disk_cat "$disk" /etc/kubernetes/manifests/kube-apiserver.yaml)
    grep -q 'advertise-address=10.0.2.15' <<<"$manifest" \
        && say "ok: the API server advertises the VM's address" || fail "unexpected advertise address"
    # The API server that answered init's health checks ran from this patched manifest.
    grep -q -- '--max-requests-inflight=444' <<<"$manifest" && grep -q 'mountPath: /etc/kubernetes/webhooks' <<<"$manifest" \
        && say "ok: the patches from write_files are in the running API server's manifest" \
        || fail "kube-apiserver.yaml lacks the patches from write_files"
    expect_line "$log" '\[patches\] Applied patch of type "application/json-patch\+json" to target "kube-apiserver"' \
        "kubestrap applied the JSON patch"
    note_timing "$log" capi-cp-init
}

# Cluster API's Ignition output (CABPK `format: ignition`, Flatcar) for a first control plane:
# JSON user-data with percent-encoded data: URLs, /etc/kubeadm.sh and /etc/kubeadm.yml (#22).
scenario_ignition-cp-init() {
    mkdir -p "$WORK/seed"
    # Unchanged but for the version: the image carries v1.37.2's images (the fixture says v1.36.2).
    sed 's/kubernetesVersion%3A%20v1\.36\.2/kubernetesVersion%3A%20v1.37.2/' \
        "$CAPI_FIXTURES/ignition-capi-control-plane/user-data" >"$WORK/seed/user-data"
    grep -q 'kubernetesVersion%3A%20v1.37.2' "$WORK/seed/user-data" || { fail "the fixture's version was not rewritten"; return 0; }
    cp_meta_data >"$WORK/seed/meta-data"
    seed_iso
    local disk log="$WORK/boot1.serial.log"
    disk=$(fresh_disk ignition-cp)
    boot_external_cp "$disk"
    check_console "$log" "$SCN/ignition-cp-init/console.tsv"
    disk_cat "$disk" /etc/modules-load.d/k8s.conf | grep -qx br_netfilter \
        && say "ok: the pre block's heredoc wrote /etc/modules-load.d/k8s.conf" || fail "no modules-load.d/k8s.conf from the heredoc"
    disk_cat "$disk" /var/log/capi-post.log | grep -q 'control plane up' \
        && say "ok: the postKubeadmCommands ran" || fail "no /var/log/capi-post.log from the post block"
    disk_exists "$disk" /etc/kubeadm.sh && fail "/etc/kubeadm.sh was written (kubestrap reads it)"
    disk_cat "$disk" /etc/kubernetes/manifests/kube-controller-manager.yaml | grep -q -- '--cluster-name=ign-test' \
        && say "ok: kubeadm.yml's ClusterConfiguration reached the manifests (cluster-name ign-test)" \
        || fail "no --cluster-name=ign-test in the controller-manager manifest"
    note_timing "$log" ignition-cp-init
}


# ---- a private LAN ---------------------------------------------------------------------------
# One private network namespace holding only a bridge (10.10.0.1/24, the host's side) and a tap
# per VM, its MAC choosing the test image's static address (cp-1 10.10.0.11, workers .21, .22).
# A VM booted with kubestrap.test.release=1 holds after its verdict until the harness releases it.
LAN_TIMEOUT=${VM_LAN_TIMEOUT:-1500}   # the LAN VMs together (the bench's cp-1 lives through the workers' joins)
CP_LIFE_TIMEOUT=${VM_CP_LIFE_TIMEOUT:-1500}   # cp-1's first boot and its upgrade by image a year later (imports, upgrade apply)

lan_up() {   # lan_up: the namespace and bridge; sets NS
    NS="kubestrap-vm-$$-$RANDOM"
    ip netns add "$NS"
    CLEANUPS+=("ip netns del $NS")
    ip -n "$NS" link set lo up
    ip -n "$NS" link add br0 type bridge
    ip -n "$NS" addr add 10.10.0.1/24 dev br0
    ip -n "$NS" link set br0 up
}

lan_tap() { ip -n "$NS" tuntap add dev "$1" mode tap && ip -n "$NS" link set "$1" master br0 up; }   # lan_tap TAP: on the bridge

lan_ca() {   # lan_ca: the cluster CA made beforehand, as an operator would; sets LAN_CA_HASH
    "$BIN_DIR/kubestrap" init phase certs --root "$WORK/ca" >"$WORK/ca.log" 2>&1
    LAN_CA_HASH=$("$BIN_DIR/kubestrap" certs ca-hash "$WORK/ca/etc/kubernetes/pki/ca.crt")
}

# lan_boot NAME OCTET DISK [boot_vm args...]: boot a VM on the LAN in the background (its seed
# is $WORK/seed-NAME); appends to LAN_NAMES/LAN_PIDS.
lan_boot() {
    local n=$1 octet=$2 disk=$3 i=${#LAN_NAMES[@]} snap=()
    shift 3
    make_seed "$WORK/$n.seed.iso" "$WORK/seed-$n"
    cp "$WORK/seed-$n/user-data" "$WORK/$n.user-data.yaml"
    lan_tap "tap$i"
    mkfifo "$WORK/$n.release.in" "$WORK/$n.release.out"
    [ "$disk" = "$IMAGE_ROOTFS" ] && snap=(--snapshot)
    (
        trap - ERR
        boot_vm "$n" "$disk" "${snap[@]}" --seed "$WORK/$n.seed.iso" --netns "$NS" \
            --tap "tap$i" "$(printf '52:54:00:0a:0a:%02x' "$octet")" --release "$WORK/$n.release" \
            --append kubestrap.test.release=1 --timeout "$LAN_TIMEOUT" "$@"
    ) &
    LAN_PIDS+=($!) LAN_NAMES+=("$n") LAN_TAPS+=("tap$i")
    BOOTS=$((BOOTS + 1))
    CLEANUPS+=("qmp $WORK/$n.qmp quit")
}

lan_wait() {   # lan_wait: until every VM holds (or ended); then "nodes" from cp-1 if it is one
    local t0 all i n
    t0=$(now)
    while [ "$(now)" -lt $((t0 + LAN_TIMEOUT * 1000)) ]; do
        all=1
        for i in "${!LAN_NAMES[@]}"; do
            grep -qs 'KUBESTRAP-TEST holding for the harness' "$WORK/${LAN_NAMES[$i]}.serial.log" && continue
            kill -0 "${LAN_PIDS[$i]}" 2>/dev/null && all=0
        done
        [ "$all" = 1 ] && break
        sleep 2
    done
    say "every VM has its verdict $(ms_to_s "$(($(now) - t0))") s after the first QEMU start"
    [ "${LAN_NAMES[0]}" = cp-1 ] || return 0
    ha_release cp-1 nodes
    wait_line "$WORK/cp-1.serial.log" 'KUBESTRAP-TEST nodes end' "${LAN_PIDS[0]}" 240 || true
}

lan_cp_user_data() { render "$SCN/cluster/cp-1.user-data"; }

# leader_election_args INDENT: the controller manager's and the scheduler's longer leader-election
# leases, as in scenarios/cluster/cp-1.user-data (see there), for the HA user-data below.
leader_election_args() {
    local c
    for c in controllerManager scheduler; do
        printf '%s%s:\n%s  extraArgs:\n' "$1" "$c" "$1"
        printf '%s  - {name: %s, value: %s}\n' "$1" leader-elect-lease-duration 120s "$1" leader-elect-renew-deadline 90s \
            "$1" leader-elect-retry-period 10s
    done
}

lan_join_docs() { NODE=$1 render "$SCN/cluster/worker.user-data"; }   # lan_join_docs NAME: a worker's JoinConfiguration for cp-1

# ---- workers join a real control plane on the host -----------------------------------------
# The control plane runs natively on the host (host-cp.sh: real etcd, API server, controller
# manager and scheduler, at 10.10.0.1 on the LAN's bridge); two workers boot at once and join it:
# worker-1 from Cluster API's Ignition data, worker-2 from its cloud-init data, each unchanged
# but for the endpoint and the CA pin. Each holds after its verdict while the host asks the
# real API server for their Nodes and CSRs. (A control-plane VM beside the workers starved under
# TCG on two cores: its controller manager restarted and a worker's CSR waited out 300 s.)
scenario_workers() {
    local n i log disk pem rcs=() LAN_TIMEOUT=600
    LAN_NAMES=() LAN_PIDS=() LAN_TAPS=()
    lan_up
    lan_ca
    mkdir -p "$WORK/cp/etc/kubernetes/pki"
    cp "$WORK/ca/etc/kubernetes/pki/ca.crt" "$WORK/ca/etc/kubernetes/pki/ca.key" "$WORK/cp/etc/kubernetes/pki/"
    render "$SCN/workers/host-cp.yaml" >"$WORK/host-cp.yaml"
    host_cp_init "$NS" "$WORK/cp" "$WORK/host-cp.yaml" || return 0
    mkdir -p "$WORK/seed-worker-1" "$WORK/seed-worker-2"
    sed -e "s|127.0.0.1%3A6443|10.10.0.1%3A6443|" -e "s|sha256%3A0\{64\}|${LAN_CA_HASH/:/%3A}|" \
        "$CAPI_FIXTURES/ignition-capi-worker/user-data" >"$WORK/seed-worker-1/user-data"
    grep -q '10.10.0.1%3A6443' "$WORK/seed-worker-1/user-data" || fail "worker-1: the Ignition endpoint was not rewritten"
    sed -e "s|127.0.0.1:6443|10.10.0.1:6443|" -e "s|sha256:0\{64\}|$LAN_CA_HASH|" \
        "$CAPI_FIXTURES/capi-worker/user-data" >"$WORK/seed-worker-2/user-data"
    for i in 1 2; do printf 'instance-id: iid-lan-worker-%s\nlocal-hostname: worker-%s\n' "$i" "$i" >"$WORK/seed-worker-$i/meta-data"; done
    lan_boot worker-1 21 "$(fresh_disk worker-1 "$PRELOADED_ROOTFS")"
    # worker-2 on the previous version's image: a kubelet one minor older than the API server.
    lan_boot worker-2 22 "$(fresh_disk worker-2 "$AB_OLD_ROOTFS")" --append kubestrap.test.verify=1
    lan_wait
    # While they hold: the real API server's view of the two Nodes and their bootstrap CSRs.
    for n in worker-1 worker-2; do
        if host_kubectl wait --for=condition=Ready "node/$n" --timeout=120s >>"$WORK/host-kubectl.log" 2>&1; then
            say "ok: the API server lists $n as Ready"
        else fail "the API server does not list $n as Ready (host-kubectl.log)"; fi
    done
    host_kubectl get nodes -o wide >>"$WORK/host-kubectl.log" 2>&1 || true
    n=$(host_signed_csrs)
    [ "$n" = 2 ] && say "ok: two bootstrap CSRs approved and signed by the controller manager" || fail "$n approved bootstrap CSRs, want 2"
    for i in 1 2; do ha_release "${LAN_NAMES[$i-1]}" exit; done
    for i in 1 2; do rcs[i]=0; wait "${LAN_PIDS[$i-1]}" || rcs[i]=$?; done
    newer_kubelet
    worker_by_image
    for i in 1 2; do
        n=${LAN_NAMES[$i-1]}
        log="$WORK/$n.serial.log"
        disk="$WORK/$n.ext4"
        expect_rc "${rcs[$i]}" 1 "$n: both kubestrap units succeeded and the node is Ready"
        reject_line "$log" "$(event_re error)" "$n: no error event"
        expect_line "$log" "KUBESTRAP-TEST node-ready name=$n " "$n: its Node is Ready (the real kubelet, as the API server reports it)"
        expect_no_secret "$log"
        expect_status "$log" role worker "$n: a worker"
        expect_status "$log" state "done" "$n: done"
        mkdir -p "$WORK/$n-pki"
        disk_rdump "$disk" /var/lib/kubelet/pki "$WORK/$n-pki"
        pem=$(find "$WORK/$n-pki" -type f -name 'kubelet-client-2*.pem' | head -n1)
        if [ -n "$pem" ] && openssl x509 -in "$pem" -noout -subject | grep -q "CN *= *system:node:$n"; then
            say "ok: $n: its kubelet client certificate is CN=system:node:$n"
        else
            fail "$n: no kubelet-client certificate for system:node:$n on its disk"
        fi
        disk_exists "$disk" /etc/kubernetes/bootstrap-kubelet.conf && fail "$n: bootstrap-kubelet.conf left behind"
        note_timing "$log" "$n"
    done
    expect_line "$WORK/worker-2.serial.log" '\[images\] 7 archives: 0 imported, 7 already present, 0 not needed on a worker' \
        "worker-2: the preloaded image's archives are present"
    expect_line "$WORK/worker-1.serial.log" '\[runcmd\] /etc/kubeadm.sh:[0-9]+: kubeadm join --config /etc/kubeadm.yml.*: performed by kubestrap' \
        "worker-1: the Ignition kubeadm.sh's join was performed by kubestrap"
    expect_line "$WORK/worker-1.serial.log" '\[runcmd\] preKubeadmCommands' "worker-1: its preKubeadmCommands block ran"
    expect_line "$WORK/worker-1.serial.log" 'KUBESTRAP-TEST sentinel present content=success' "worker-1: the sentinel says success"
    check_capi "$WORK/worker-2.serial.log"
    disk_cat "$WORK/worker-2.ext4" /var/lib/kubelet/kubeadm-flags.env | grep -q 'cloud-provider=external' \
        && say "ok: worker-2: kubeletExtraArgs reached the kubelet flags" || fail "worker-2: no --cloud-provider=external in kubeadm-flags.env"
    SCENARIO_NOTE="worker-1 (Ignition) + worker-2 (cloud-init) joined a real control plane on the host"
}

# worker_by_image: worker-2 joined on the previous version's image (kubelet AB_OLD, the API server
# v1.37.2: the control plane is upgraded first, as the skew policy orders). kubeadm-config back
# at v1.37.2 (as upgrade apply leaves it; newer_kubelet set it to v1.36.3), worker-2's /usr
# becomes the v1.37.2 image's (swap_usr: /etc and /var kept) and it boots: its pre-kubelet stage
# finds the API server at v1.37.2, imports kube-proxy's archive only (a worker skips the control
# plane's), runs `upgrade node`, and the Node is Ready again on the v1.37.2 kubelet.
worker_by_image() {
    local disk="$WORK/worker-2.ext4" log="$WORK/worker-2-next.serial.log" rc=0 v
    v=$(host_kubectl get node worker-2 -o 'jsonpath={.status.nodeInfo.kubeletVersion}' 2>>"$WORK/host-kubectl.log")
    [ "$v" = "$AB_OLD" ] && say "ok: worker-2 joined with the kubelet of $AB_OLD" || fail "worker-2's kubelet is ${v:-?}, want $AB_OLD"
    python3 -c 'import json, sys; print(json.dumps({"data": {"ClusterConfiguration": json.load(open(sys.argv[1]))["data"]["ClusterConfiguration"]}}))' \
        "$WORK/kubeadm-config.json" >"$WORK/kubeadm-config.back"
    host_kubectl -n kube-system patch configmap kubeadm-config --type merge --patch-file "$WORK/kubeadm-config.back" \
        >>"$WORK/host-kubectl.log" 2>&1 || { fail "could not set kubeadm-config back to v1.37.2 (host-kubectl.log)"; return 0; }
    swap_usr "$disk" "$PRELOADED_ROOTFS" && say "ok: worker-2's /usr is now the v1.37.2 image's" \
        || { fail "swapping worker-2's /usr failed"; return 0; }
    boot_vm worker-2-next "$disk" --seed "$WORK/worker-2.seed.iso" --netns "$NS" --tap tap1 52:54:00:0a:0a:16 || rc=$?
    expect_rc "$rc" 1 "worker-2 on the next image: both units succeeded and the node is Ready"
    expect_line "$log" "\\[upgrade\\] This node runs Kubernetes $AB_OLD; its image carries v1\\.37\\.2" "worker-2: the image's version is compared with the node's"
    expect_line "$log" '\[images\] 7 archives: 1 imported, 3 already present, 3 not needed on a worker' \
        "worker-2: only kube-proxy's new archive imported (the control plane's 3 new ones skipped)"
    expect_line "$log" '\[upgrade\] The control plane runs v1\.37\.2: upgrading this node to v1\.37\.2' "worker-2 runs upgrade node"
    expect_line "$log" "\\[upgrade\\] This node was upgraded from $AB_OLD to v1\\.37\\.2" "worker-2 was upgraded"
    expect_line "$log" 'KUBESTRAP-TEST node-ready name=worker-2 ' "worker-2: its Node is Ready again"
    v=$(host_kubectl get node worker-2 -o 'jsonpath={.status.nodeInfo.kubeletVersion}' 2>>"$WORK/host-kubectl.log")
    [ "$v" = v1.37.2 ] && say "ok: the API server lists worker-2 on the kubelet of v1.37.2" || fail "worker-2's kubelet is ${v:-?}, want v1.37.2"
    [ "$(disk_cat "$disk" /var/lib/kubestrap/kubernetes-version | tr -d '[:space:]')" = v1.37.2 ] \
        && say "ok: worker-2 records v1.37.2" || fail "worker-2: /var/lib/kubestrap/kubernetes-version is not v1.37.2"
    disk_exists "$disk" /etc/kubernetes/tmp && say "ok: worker-2: upgrade node backed up the kubelet config under /etc/kubernetes/tmp" \
        || fail "worker-2: no backup under /etc/kubernetes/tmp"
}

# newer_kubelet: kubeadm-config now says v1.36.3 (as before an upgrade); worker-3, whose kubelet
# is the image's v1.37.2, is refused once discovery has verified the cluster (the skew rule
# named, exit 3 as a preflight error), with none of its node's files written and no CSR sent.
newer_kubelet() {
    local log="$WORK/worker-3.serial.log" disk rc=0 n
    host_kubectl -n kube-system get configmap kubeadm-config -o json >"$WORK/kubeadm-config.json"
    python3 -c 'import json, sys
cm = json.load(open(sys.argv[1]))
c = cm["data"]["ClusterConfiguration"]
assert "kubernetesVersion: v1.37.2\n" in c, c
print(json.dumps({"data": {"ClusterConfiguration": c.replace("kubernetesVersion: v1.37.2\n", "kubernetesVersion: v1.36.3\n")}}))' \
        "$WORK/kubeadm-config.json" >"$WORK/kubeadm-config.patch"
    host_kubectl -n kube-system patch configmap kubeadm-config --type merge --patch-file "$WORK/kubeadm-config.patch" \
        >>"$WORK/host-kubectl.log" 2>&1 || { fail "could not set kubeadm-config to v1.36.3 (host-kubectl.log)"; return 0; }
    mkdir -p "$WORK/seed-worker-3"
    render "$SCN/workers/newer-kubelet.user-data" >"$WORK/seed-worker-3/user-data"
    printf 'instance-id: iid-lan-worker-3\nlocal-hostname: worker-3\n' >"$WORK/seed-worker-3/meta-data"
    make_seed "$WORK/worker-3.seed.iso" "$WORK/seed-worker-3"
    lan_tap tap9
    disk=$(fresh_disk worker-3 "$PRELOADED_ROOTFS")
    boot_vm worker-3 "$disk" --seed "$WORK/worker-3.seed.iso" --netns "$NS" --tap tap9 52:54:00:0a:0a:0c || rc=$?
    expect_rc "$rc" 3 "worker-3 (a kubelet newer than the cluster): kubestrap.service failed"
    expect_line "$log" "$(event_re error).*KubeletVersion.*the kubelet version is higher than the control plane version.*1\\.37\\.2.*1\\.36\\.3" \
        "worker-3: the error names the skew rule and both versions"
    # (Its status.json line is longer than the console keeps whole: read the leading fields.)
    expect_line "$log" 'KUBESTRAP-TEST status.json \{ *"stage": "pre-kubelet", *"state": "failed", *"phase": "discovery"' \
        "worker-3: status.json says it failed in discovery"
    # A readable disk first: an unreadable one would pass every "not written" below.
    disk_exists "$disk" /usr/bin/kubestrap || fail "worker-3: its disk cannot be read (debugfs)"
    for f in /etc/kubernetes/bootstrap-kubelet.conf /etc/kubernetes/kubelet.conf /var/lib/kubelet/config.yaml /etc/kubernetes/pki/ca.crt; do
        disk_exists "$disk" "$f" && fail "worker-3: $f written before the refusal"
    done
    n=$(host_kubectl get csr -o name 2>>"$WORK/host-kubectl.log" | wc -l)
    [ "$n" = 2 ] && say "ok: worker-3 sent no CSR (still two)" || fail "$n CSRs after worker-3, want 2"
}

# ---- one control plane's life ---------------------------------------------------------------
# cp-1 boots the image of the previous Kubernetes version (AB_OLD, preloaded) alone on the LAN,
# with a CA the harness made (credentials), and inits a cluster of that version to its Node Ready;
# then its disk boots twice more: a reboot with the kubelet masked (kubestrap must do nothing),
# and, with its /usr swapped for the v1.37.2 as-built image's as an A/B system boots its other
# slot (/etc and /var kept), a year and a month later: every-boot renewal, the new image's
# archives imported, `upgrade apply v1.37.2` by the image, the node back Ready with its Pods.
scenario_cp-lifecycle() {
    local rc log st t cpdisk cred ca1 ca2 sa1 sa2 c
    LAN_NAMES=() LAN_PIDS=() LAN_TAPS=(tap0)
    lan_up
    lan_ca
    mkdir -p "$WORK/seed-cp-1"
    lan_cp_user_data | sed "s/^kubernetesVersion: v1\.37\.2\$/kubernetesVersion: $AB_OLD/" >"$WORK/seed-cp-1/user-data"
    grep -q "^kubernetesVersion: $AB_OLD\$" "$WORK/seed-cp-1/user-data" || { fail "cp-1's user-data does not say $AB_OLD"; return 0; }
    cp "$WORK/seed-cp-1/user-data" "$WORK/cp-1.user-data.yaml"
    printf 'instance-id: iid-lan-cp-1\nlocal-hostname: cp-1\n' >"$WORK/seed-cp-1/meta-data"
    make_seed "$WORK/cp-1.seed.iso" "$WORK/seed-cp-1"
    lan_tap tap0
    cred=(--cred-file "kubestrap.ca-crt=$WORK/ca/etc/kubernetes/pki/ca.crt" --cred-file "kubestrap.ca-key=$WORK/ca/etc/kubernetes/pki/ca.key")
    cpdisk=$(fresh_disk cp-1 "$AB_OLD_ROOTFS")
    rc=0
    # Not waited for the Pods here (under TCG that wait is ~5 min after Node Ready on a first
    # boot): the year-later boot of this disk waits for CoreDNS and kube-proxy Running.
    lan_reboot cp-1 "$cpdisk" --timeout "$CP_LIFE_TIMEOUT" --append kubestrap.test.pods=0 "${cred[@]}" || rc=$?

    # The first boot: a control plane of the previous version, to its Node Ready.
    log="$WORK/cp-1.serial.log"
    CP_ENDPOINT=10.10.0.11:6443 check_cp_boot "$log" "$rc" no-pods
    expect_line "$log" '\[images\] 7 archives: 0 imported, 7 already present' "the preloaded image's 7 archives are present"
    expect_line "$log" "KUBESTRAP-TEST nodes cp-1 +Ready .* $AB_OLD " "the Node runs the kubelet of $AB_OLD"
    expect_line "$log" '\[kubelet-finalize\] Updating "/etc/kubernetes/kubelet.conf" to point to a rotatable kubelet client certificate and key' \
        "init's kubelet-finalize points kubelet.conf at the rotating pair"
    disk_cat "$cpdisk" /etc/kubernetes/pki/ca.crt | cmp -s - "$WORK/ca/etc/kubernetes/pki/ca.crt" \
        && say "ok: the cluster CA is the one given as a credential" || fail "cp-1's ca.crt is not the credential's CA"
    note_timing "$log" cp-1
    ca1=$(disk_cat "$cpdisk" /etc/kubernetes/pki/ca.crt | sha256sum)
    sa1=$(disk_cat "$cpdisk" /etc/kubernetes/pki/sa.key | sha256sum)

    # A reboot: kubestrap must see its work done and do nothing. The kubelet is masked: this boot
    # proves that nothing ran, not that the Pods come back (the next boot does).
    local log2="$WORK/boot2.serial.log"
    rc=0
    lan_reboot boot2 "$cpdisk" --append "systemd.mask=kubelet.service kubestrap.test.ready=0" "${cred[@]}" || rc=$?
    expect_rc "$rc" 1 "second boot: both units succeed"
    for st in pre-kubelet post-kubelet; do
        t=$(event_at "$log2" skipped "$st")
        if [ -n "$t" ]; then say "ok: second boot: $st skipped at $t s"; else fail "second boot: no skipped event from $st"; fi
    done
    reject_line "$log2" "$(event_re phase)" "second boot runs no phase"
    t=$(unit_secs "$log2" kubestrap.service)
    if [ -n "$t" ] && awk -v t="$t" 'BEGIN { exit !(t < 2.0) }'; then say "ok: second boot: kubestrap.service took $t s (< 2 s)"
    else fail "second boot: kubestrap.service took ${t:-?} s (want < 2 s)"; fi
    ca2=$(disk_cat "$cpdisk" /etc/kubernetes/pki/ca.crt | sha256sum)
    [ "$ca1" = "$ca2" ] && say "ok: the CA is unchanged" || fail "the CA changed on the second boot"

    # The next image, as an A/B system boots its other slot: /usr is the v1.37.2 as-built image's
    # (its archives in /usr/share/kubestrap/images), /etc and /var are the node's.
    swap_usr "$cpdisk" "$AS_BUILT_ROOTFS" && say "ok: cp-1's /usr is now the v1.37.2 image's" \
        || { fail "swapping cp-1's /usr failed"; return 0; }
    # A year and a month later (the machine was off): the every-boot pass renews every leaf before
    # the kubelet starts, and the node comes back Ready on the same CA and service-account keys,
    # upgraded to the image's v1.37.2.
    local log3="$WORK/boot3.serial.log" log3c="$WORK/boot3cut.serial.log" both="$WORK/boot3-both.serial.log"
    local kc3 api1 kept="" d
    api1=$(disk_cat "$cpdisk" /etc/kubernetes/pki/apiserver.crt | sha256sum)
    [ "$api1" != "$(sha256sum </dev/null)" ] || fail "test bug: cp-1 has no apiserver.crt before the year passes"
    # A power cut (QMP quit) as the upgrade by image moves a manifest in, holding the Lease: the
    # next boot finds the marker, takes its own Lease back, and finishes the upgrade.
    rc=0
    lan_reboot boot3cut "$cpdisk" --timeout "$CP_LIFE_TIMEOUT" --rtc "$(date -u -d '+400 days' +%Y-%m-%dT%H:%M:%S)" \
        --quit-on 'upgrade/staticpods\] Moving new manifest to' "${cred[@]}" || rc=$?
    expect_line "$log3c" "HARNESS: QMP quit sent" "a power cut as the upgrade by image moved a manifest in"
    expect_rc "$rc" 0 "QEMU stopped by the cut"
    disk_exists "$cpdisk" /var/lib/kubestrap/upgrade-in-progress && say "ok: the cut left the upgrade's marker" \
        || fail "no /var/lib/kubestrap/upgrade-in-progress after a cut mid-upgrade"
    # The renewal ran in that boot, before the kubelet: its backup holds the expired apiserver.crt
    # (read now: the upgrade's own renewals later keep only the newest three backups).
    for d in $(disk_ls "$cpdisk" /etc/kubernetes/tmp | grep '^kubeadm-backup-certs-'); do
        [ "$(disk_cat "$cpdisk" "/etc/kubernetes/tmp/$d/pki/apiserver.crt" | sha256sum)" = "$api1" ] && kept=$d
    done
    [ -n "$kept" ] && say "ok: the expired apiserver.crt is kept in /etc/kubernetes/tmp/$kept" \
        || fail "no kubeadm-backup-certs-* under /etc/kubernetes/tmp holds the expired apiserver.crt"
    rc=0
    lan_reboot boot3 "$cpdisk" --timeout "$CP_LIFE_TIMEOUT" --rtc "$(date -u -d '+400 days' +%Y-%m-%dT%H:%M:%S)" --append "kubestrap.test.upgrade-refused=v1.37.3" "${cred[@]}" || rc=$?
    expect_rc "$rc" 1 "a year later: both units succeed, the Node is Ready and its Pods run"
    expect_line "$log3" 'An upgrade to v1\.37\.2 was cut short \(/var/lib/kubestrap/upgrade-in-progress\)' "the next boot resumes the cut upgrade"
    expect_line "$log3" '\[upgrade\] cp-1 holds kube-system/kubestrap-upgrade' "the next boot takes its own Lease back"
    reject_line "$log3" 'waiting for it' "the next boot waits for no Lease"
    disk_exists "$cpdisk" /var/lib/kubestrap/upgrade-in-progress && fail "the marker is left after the upgrade finished"
    # The renewal and the imports ran in the boot that was cut; the checks read both boots.
    cat "$log3c" "$log3" >"$both"
    expect_line "$both" "$(event_re certs).*apiserver: renewed" "a year later: the API server's certificate was renewed"
    expect_line "$both" "$(event_re certs).*admin.conf: renewed" "a year later: admin.conf's client certificate was renewed"
    expect_line "$both" "$(event_re certs).*kubelet-client: renewed" "a year later: the kubelet's client certificate was re-issued"
    expect_line "$both" "$(event_re certs).*kubelet-serving: removed" "a year later: the kubelet's expired serving certificate was removed"
    expect_line "$log3" 'KUBESTRAP-TEST pods-running ' "a year later: CoreDNS and kube-proxy Pods are Running"
    # The upgrade by image: the new version's 4 archives imported before the kubelet (etcd,
    # CoreDNS and pause are the same images), then upgrade apply once the kubelet runs.
    expect_line "$both" '\[images\] 7 archives: 4 imported, 3 already present' "the next image: its 4 new archives imported before the kubelet"
    expect_line "$log3" "\\[upgrade\\] This control plane runs $AB_OLD; its image carries v1\\.37\\.2" "the image's version is compared with the node's"
    expect_line "$log3" "\\[upgrade\\] The cluster runs $AB_OLD: this control plane upgrades it to v1\\.37\\.2 \\(upgrade apply\\)" "the first control plane on the image runs upgrade apply"
    expect_line "$log3" 'SUCCESS! A control plane node of your cluster was upgraded to "v1\.37\.2"' "kubeadm's success line"
    status_json "$log3" | python3 -c 'import json, sys; u = json.load(sys.stdin)["upgrade"]; sys.exit(not (u["state"] == "upgraded" and "apply" in u["reason"]))' 2>/dev/null \
        && say "ok: status.json says upgraded by upgrade apply" || fail "status.json has no upgrade by apply: $(status_json "$log3")"
    expect_line "$log3" 'KUBESTRAP-TEST nodes cp-1 +Ready .* v1\.37\.2 ' "the Node runs the kubelet of v1.37.2"
    expect_line "$log3" 'KUBESTRAP-TEST cluster-config kubernetesVersion: v1\.37\.2([^0-9.]|$)' "kubeadm-config says v1.37.2"
    for c in kube-apiserver kube-controller-manager kube-scheduler; do
        expect_line "$log3" "KUBESTRAP-TEST pod-image $c-cp-1 Running registry\\.k8s\\.io/$c:v1\\.37\\.2([^0-9.]|$)" "$c runs v1.37.2"
    done
    expect_line "$log3" 'KUBESTRAP-TEST pod-image kube-proxy-[a-z0-9]+ Running registry\.k8s\.io/kube-proxy:v1\.37\.2([^0-9.]|$)' "kube-proxy runs v1.37.2"
    debugfs -R "ls /etc/kubernetes/tmp" "$cpdisk" 2>/dev/null | grep -q 'kubeadm-backup-manifests-' \
        && say "ok: the old manifests are backed up under /etc/kubernetes/tmp/kubeadm-backup-manifests-*" || fail "no kubeadm-backup-manifests-* on cp-1"
    [ "$(disk_cat "$cpdisk" /var/lib/kubestrap/kubernetes-version | tr -d '[:space:]')" = v1.37.2 ] \
        && say "ok: the node records v1.37.2" || fail "/var/lib/kubestrap/kubernetes-version is not v1.37.2"
    # init's kubelet-finalize already pointed kubelet.conf at the rotating pair, so the every-boot
    # pass has no embedded identity to replace; the renewed kubelet-client is what the kubelet uses.
    kc3=$(disk_cat "$cpdisk" /etc/kubernetes/kubelet.conf)
    if grep -q 'client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem' <<<"$kc3" \
        && ! grep -q 'client-certificate-data' <<<"$kc3"; then
        say "ok: a year later kubelet.conf still names kubelet-client-current.pem"
    else fail "a year later kubelet.conf does not name kubelet-client-current.pem: ${kc3:-missing}"; fi
    if status_json "$log3" | python3 -c 'import json, sys; r = [c for c in json.load(sys.stdin)["certificates"] if c["name"] == "apiserver"]; sys.exit(not (r and r[0]["residual_days"] > 360))' 2>/dev/null; then
        say "ok: status.json's table shows the renewed API server certificate"
    else fail "status.json has no renewed apiserver row: $(status_json "$log3")"; fi
    ca2=$(disk_cat "$cpdisk" /etc/kubernetes/pki/ca.crt | sha256sum)
    sa2=$(disk_cat "$cpdisk" /etc/kubernetes/pki/sa.key | sha256sum)
    [ "$ca1" = "$ca2" ] && say "ok: a year later the CA is unchanged" || fail "the CA changed a year later"
    [ "$sa1" = "$sa2" ] && say "ok: a year later sa.key is unchanged" || fail "sa.key changed a year later"
    # Then `upgrade apply v1.37.3 -y` on it: no image of v1.37.3 here and no registry, so the
    # prepull refuses it (exit 3) and no manifest or kubelet config changed.
    expect_line "$log3" 'KUBESTRAP-TEST upgrade-refused rc=3 files=same' \
        "upgrade apply to a version without images: refused (exit 3), nothing changed"
    expect_line "$log3" 'KUBESTRAP-TEST upgrade-out .*\[upgrade/preflight\] Pulling images required' \
        "upgrade apply prints kubeadm's prepull lines"
    expect_line "$log3" 'KUBESTRAP-TEST upgrade-out .*ImagePull.*registry.k8s.io/kube-apiserver:v1.37.3' \
        "the refusal names the ImagePull check and the missing image"
    SCENARIO_NOTE="cp-1 at $AB_OLD; reboot: pre-kubelet unit ${t:-?}s; a year later on the v1.37.2 image: $(unit_secs "$log3" kubestrap.service)s + upgrade"
}

# lan_reboot NAME DISK [boot_vm args...]: cp-1's disk booted again in the foreground, on its tap
# and MAC (its LAN address), with its seed.
lan_reboot() {
    local n=$1 disk=$2
    shift 2
    boot_vm "$n" "$disk" --seed "$WORK/cp-1.seed.iso" --netns "$NS" --tap "${LAN_TAPS[0]}" 52:54:00:0a:0a:0b "$@"
}

# ---- HA: control planes from one user-data, and a worker -----------------------------------
# All VMs run at once in a private network namespace, on one bridge (10.10.0.1/24 on the host
# side; nothing else in the namespace): a tap per VM as its only NIC, its MAC choosing the test
# image's static address (units/test/network/). cp-1 inits (initNode) with the CA given as
# credentials; the other control planes boot the byte-identical seed user-data and join as
# control planes (download-certs, etcd learner added then promoted); the worker joins at
# cp-1:6443. Each VM's report unit holds it (kubestrap.test.release=1) until every VM has its
# verdict, so no etcd member goes away while another joins; then each control plane prints its
# `etcdctl member list`, and all are released.
HA_TIMEOUT=${VM_HA_TIMEOUT:-2400}  # seconds for the whole group of VMs (four real nodes under TCG)
HA_CP_COUNT=${VM_HA_CONTROL_PLANES:-3}
# vCPUs a guest. VM_HA_SMP=1 (tried in session 13: less overcommit of the host's two cores) made
# it worse: cp-1 alone took 555 s to its verdict and its API server then stopped answering while
# cp-2 joined. A control plane on one CPU ignores kubeadm's NumCPU check, as a user would.
HA_SMP=${VM_HA_SMP:-2}
HA_IGNORE=$([ "$HA_SMP" -lt 2 ] && echo NumCPU || true)
HA_ENDPOINT=10.10.0.11:6443

ha_user_data() {   # the one user-data of every control plane
    cat <<EOF
#cloud-config
kubestrap:
  role: control-plane
  initNode: cp-1
  token: $TOKEN
  controlPlaneEndpoint: $HA_ENDPOINT
  caCertHashes: ['$HA_CA_HASH']
  certificateKey: '$HA_KEY'
  kubernetesVersion: v1.37.2
  podSubnet: 10.244.0.0/16
  # kubeadm's timeouts for a slow machine (the test host: three real control planes under TCG on
  # two cores): a second API server's first start there can outlast the 4-minute defaults.
  kubeadm: |
    apiVersion: kubeadm.k8s.io/v1beta4
    kind: InitConfiguration
    timeouts: {controlPlaneComponentHealthCheck: 10m0s, kubernetesAPICall: 5m0s, etcdAPICall: 5m0s}
    nodeRegistration: {ignorePreflightErrors: [$HA_IGNORE]}
    ---
    apiVersion: kubeadm.k8s.io/v1beta4
    kind: ClusterConfiguration
    # etcd's raft timing for starved guests (test host): with the defaults (100 ms heartbeats,
    # 1 s elections) two members under TCG kept electing, lost quorum, and cp-1's API server
    # went down while cp-2 joined.
    etcd:
      local:
        extraArgs:
        - {name: heartbeat-interval, value: "500"}
        - {name: election-timeout, value: "5000"}
$(leader_election_args "    ")
    ---
    apiVersion: kubeadm.k8s.io/v1beta4
    kind: JoinConfiguration
    timeouts: {controlPlaneComponentHealthCheck: 10m0s, kubernetesAPICall: 5m0s, etcdAPICall: 5m0s, tlsBootstrap: 10m0s}
    nodeRegistration: {ignorePreflightErrors: [$HA_IGNORE]}
EOF
}

ha_worker_user_data() {
    cat <<EOF
#cloud-config
kubestrap:
  role: worker
  token: $TOKEN
  controlPlaneEndpoint: $HA_ENDPOINT
  caCertHashes: ['$HA_CA_HASH']
EOF
}

ha_wait_hold() {   # ha_wait_hold NAME PID T0: until NAME holds for the harness (or ended, or time is up)
    while [ "$(now)" -lt $(($3 + HA_TIMEOUT * 1000)) ] && kill -0 "$2" 2>/dev/null \
        && ! grep -qs 'KUBESTRAP-TEST holding for the harness' "$WORK/$1.serial.log"; do
        sleep 2
    done
    say "$1 has its verdict $(ms_to_s "$(($(now) - $3))") s after the first QEMU start"
}

ha_release() {   # ha_release NAME COMMAND: one line to the VM's kubestrap.release port
    timeout 5 sh -c 'printf "%s\n" "$2" >"$1"' sh "$WORK/$1.release.in" "$2" 2>/dev/null || true
}

scenario_ha-control-plane() {
    local n names=() addr=() i rc log st pids=() t0 deadline all want got extra note=()
    case "$HA_CP_COUNT" in
        2 | 3) ;;
        *) fail "VM_HA_CONTROL_PLANES=$HA_CP_COUNT: 2 or 3 (the test image has LAN addresses for three)"; return 0 ;;
    esac
    for ((i = 1; i <= HA_CP_COUNT; i++)); do names+=("cp-$i"); addr+=("10.10.0.1$i"); done
    names+=(worker-1) addr+=(10.10.0.21)
    # The cluster CA, made beforehand as an operator would, so that the user-data can pin it.
    "$BIN_DIR/kubestrap" init phase certs --root "$WORK/ca" >"$WORK/ca.log" 2>&1
    HA_CA_HASH=$("$BIN_DIR/kubestrap" certs ca-hash "$WORK/ca/etc/kubernetes/pki/ca.crt")
    HA_KEY=$(openssl rand -hex 32)
    ha_user_data >"$WORK/user-data.yaml"
    NS="kubestrap-vm-$$-$RANDOM"
    ip netns add "$NS"
    CLEANUPS+=("ip netns del $NS")
    ip -n "$NS" link set lo up
    ip -n "$NS" link add br0 type bridge
    ip -n "$NS" addr add 10.10.0.1/24 dev br0
    ip -n "$NS" link set br0 up
    for i in "${!names[@]}"; do
        n=${names[$i]}
        mkdir -p "$WORK/seed-$n"
        if [[ $n == cp-* ]]; then
            cp "$WORK/user-data.yaml" "$WORK/seed-$n/user-data"
        else
            ha_worker_user_data >"$WORK/seed-$n/user-data"
        fi
        printf 'instance-id: iid-ha-%s\nlocal-hostname: %s\n' "$n" "$n" >"$WORK/seed-$n/meta-data"
        make_seed "$WORK/$n.seed.iso" "$WORK/seed-$n"
        cp "$WORK/seed-$n/user-data" "$WORK/$n.user-data.yaml"
        cp "$WORK/seed-$n/meta-data" "$WORK/$n.meta-data.txt"
        lan_tap "tap$i"
        mkfifo "$WORK/$n.release.in" "$WORK/$n.release.out"
    done
    if [ "$(for n in "${names[@]}"; do [[ $n == cp-* ]] && sha256sum <"$WORK/seed-$n/user-data"; done | sort -u | wc -l)" = 1 ]; then
        say "ok: every control plane's seed holds the same user-data"
    else
        fail "the control planes' seed user-data differ"
    fi
    t0=$(now)
    for i in "${!names[@]}"; do
        n=${names[$i]}
        extra=()
        # Staggered: each VM boots once the one before holds (its verdict given): cp-2 after
        # cp-1, cp-3 after cp-2, the worker after cp-3. Real nodes starting together on two host
        # cores under TCG starve etcd until it loses quorum (cp-3 and the worker at once did);
        # a fleet's machines do not all come up in the same second either.
        if [ "$i" -gt 0 ]; then
            ha_wait_hold "${names[$((i - 1))]}" "${pids[$((i - 1))]}" "$t0"
        fi
        # The CA as binary credentials (PEM has newlines) to every control plane: one launch
        # configuration for all of them; only the init node uses it (the others download it).
        if [[ $n == cp-* ]]; then
            extra=(--cred-file "kubestrap.ca-crt=$WORK/ca/etc/kubernetes/pki/ca.crt"
                --cred-file "kubestrap.ca-key=$WORK/ca/etc/kubernetes/pki/ca.key")
        fi
        # In the background, without the scenario's ERR trap (QEMU's exit status 1 is a pass).
        (
            trap - ERR
            VM_SMP=$HA_SMP boot_vm "$n" "$IMAGE_ROOTFS" --snapshot --seed "$WORK/$n.seed.iso" --netns "$NS" \
                --tap "tap$i" "$(printf '52:54:00:0a:0a:%02x' "${addr[$i]##*.}")" --release "$WORK/$n.release" \
                --append kubestrap.test.release=1 --timeout "$HA_TIMEOUT" "${extra[@]}"
        ) &
        pids+=($!)
        CLEANUPS+=("qmp $WORK/$n.qmp quit")
    done
    # Every VM holds after its verdict: wait for all of them (a VM that ended counts as there).
    deadline=$((t0 + HA_TIMEOUT * 1000))
    while [ "$(now)" -lt "$deadline" ]; do
        all=1
        for i in "${!names[@]}"; do
            grep -qs 'KUBESTRAP-TEST holding for the harness' "$WORK/${names[$i]}.serial.log" && continue
            kill -0 "${pids[$i]}" 2>/dev/null && all=0
        done
        [ "$all" = 1 ] && break
        sleep 2
    done
    say "every VM has its verdict $(ms_to_s "$(($(now) - t0))") s after the first QEMU start"
    for n in "${names[@]}"; do
        if [[ $n == cp-* ]]; then ha_release "$n" etcd-members; fi
    done
    ha_release cp-1 nodes
    for ((i = 0; i < 30; i++)); do
        all=1
        for n in "${names[@]}"; do
            [[ $n == cp-* ]] || continue
            grep -qs 'KUBESTRAP-TEST etcd-members end' "$WORK/$n.serial.log" || all=0
        done
        [ "$all" = 1 ] && break
        sleep 1
    done
    for n in "${names[@]}"; do ha_release "$n" exit; done
    for i in "${!names[@]}"; do
        rc=0
        wait "${pids[$i]}" || rc=$?
        n=${names[$i]}
        log="$WORK/$n.serial.log"
        expect_rc "$rc" 1 "$n: the report unit saw both kubestrap units succeed"
        expect_event "$log" "done" pre-kubelet
        expect_event "$log" "done" post-kubelet
        reject_line "$log" "$(event_re error)" "$n: no error event"
        reject_line "$log" "$HA_KEY" "$n: the certificate key never reaches the console"
        # Like cp-init, the init node prints the join command with the token; no other node does.
        [ "$n" = cp-1 ] || reject_line "$log" "$TOKEN_SECRET" "$n: the token secret never reaches the console"
        st=$(status_json "$log")
        want=control-plane
        [[ $n == worker-* ]] && want=worker
        if [[ $st =~ \"role\":\ *\"$want\" ]] && [[ $st =~ \"state\":\ *\"done\" ]]; then
            say "ok: $n: status.json role $want, state done"
        else
            fail "$n: status.json is not role $want, state done: ${st:-missing}"
        fi
        note_timing "$log" "$n"
        note+=("$n $(event_at "$log" "done" post-kubelet)s")
    done
    log="$WORK/cp-1.serial.log"
    expect_line "$log" 'No cluster answers at controlPlaneEndpoint 10\.10\.0\.11:6443' "cp-1: nothing at the endpoint yet, so it inits"
    expect_line "$log" "Using the CA from credential kubestrap\.ca-crt \\($HA_CA_HASH\\)" "cp-1: the cluster CA is the credential's (the pinned one)"
    for n in "${names[@]}"; do
        log="$WORK/$n.serial.log"
        case "$n" in
            cp-1) ;;
            cp-*)
                i=${n#cp-}
                expect_line "$log" '\[download-certs\] Saving the certificates' "$n: downloaded the shared CAs (certificateKey)"
                # Under TCG a MemberAdd may time out on the client after etcd applied it: the retry
                # then finds this node's learner in the member list and reuses it.
                expect_line "$log" "\\[etcd\\] (Announced new etcd member joining to the existing etcd cluster|etcd member [0-9a-f]+ with peer URL https://10\\.10\\.0\\.1$i:2380 already exists \\(learner, not started yet\\))" \
                    "$n: added as an etcd learner"
                if has_line "$log" 'too many learner members in cluster'; then
                    say "note: $n waited while another control plane's etcd learner caught up (etcd allows one learner)"
                fi
                expect_line "$log" "\\[etcd\\] The learner was promoted as a voting member \\(https://10\\.10\\.0\\.1$i:2380\\)" "$n: its learner promoted"
                expect_line "$log" '\[wait-control-plane\] The kube-apiserver is healthy' "$n: wait-control-plane saw its own API server"
                expect_line "$log" '\[mark-control-plane\] Marked' "$n: marked as control plane (its Node is in the cluster's API)"
                ;;
            *) expect_line "$log" "$(event_re phase "" kubelet-start)" "$n: the worker joined (kubelet-start: TLS bootstrap)" ;;
        esac
    done
    # The real cluster: every Node Ready, as the API server reports it.
    for n in "${names[@]}"; do
        expect_line "$WORK/$n.serial.log" "KUBESTRAP-TEST node-ready name=$n " "$n: its Node is Ready"
        expect_line "$WORK/cp-1.serial.log" "KUBESTRAP-TEST cluster-node $n Ready=True" "the cluster lists $n as Ready"
    done
    # Each control plane's view of etcd: every control plane a started voter, nothing else.
    want=$(for ((i = 1; i <= HA_CP_COUNT; i++)); do printf 'cp-%d=https://10.10.0.1%d:2380 ' "$i" "$i"; done)
    for n in "${names[@]}"; do
        [[ $n == cp-* ]] || continue
        sed -n 's/.*KUBESTRAP-TEST etcd-member //p' "$WORK/$n.serial.log" >"$WORK/$n.etcd-members.txt"
        got=$(awk -F', ' '$2 == "started" && $6 == "false" { print $3 "=" $4 }' "$WORK/$n.etcd-members.txt" | sort | tr '\n' ' ')
        if [ "$got" = "$want" ] && [ "$(wc -l <"$WORK/$n.etcd-members.txt")" = "$HA_CP_COUNT" ]; then
            say "ok: $n: etcd has $HA_CP_COUNT started voters: $got"
        else
            fail "$n: etcd's members are not the $HA_CP_COUNT control planes as started voters: $(tr '\n' ';' <"$WORK/$n.etcd-members.txt")"
        fi
    done
    SCENARIO_NOTE="$HA_CP_COUNT control planes + 1 worker; qemu->done: $(IFS=,; echo "${note[*]}")"
}

# ---- failure paths ------------------------------------------------------------------------
scenario_broken-user-data() {
    mkdir -p "$WORK/seed"
    # Valid YAML, a known kind, one unknown field: kubeadm-strict decoding must name it.
    render "$SCN/broken-user-data/user-data" >"$WORK/seed/user-data"
    cp_meta_data >"$WORK/seed/meta-data"
    seed_iso
    local disk rc=0 log="$WORK/boot1.serial.log" p
    disk=$(fresh_disk broken)
    boot_vm boot1 "$disk" --seed "$WORK/seed.iso" || rc=$?
    expect_rc "$rc" 3 "the report unit saw kubestrap.service fail"
    check_console "$log" "$SCN/broken-user-data/console.tsv"
    expect_status "$log" state failed "the node says it failed"
    disk_exists "$disk" /usr/bin/kubestrap || fail "the disk cannot be read (debugfs): the checks below would pass"
    for p in /etc/kubernetes/pki /etc/kubernetes/manifests /etc/kubernetes/admin.conf \
        /var/lib/kubelet/config.yaml /var/lib/kubestrap/done-pre-kubelet; do
        if disk_exists "$disk" "$p"; then fail "$p was written despite bad user-data"; else say "ok: no $p on the disk"; fi
    done
}

# The image directory removed and no registry reachable (every registry is redirected to a
# closed port, and the guest's namespace holds only lo): preflight's ImagePull fails before the
# kubelet starts, naming every missing image; nothing of the control plane is written.
strip_images() {  # strip_images DISK [TO]: remove the image's archives (moving them to TO)
    local f
    [ -n "${2:-}" ] && mkdir -p "$2"
    for f in $(debugfs -R "ls /usr/share/kubestrap/images" "$1" 2>/dev/null | grep -o '[a-z0-9.-]*\.tar'); do
        [ -n "${2:-}" ] && debugfs -R "dump /usr/share/kubestrap/images/$f $2/$f" "$1" >/dev/null 2>&1
        debugfs -w -R "rm /usr/share/kubestrap/images/$f" "$1" >/dev/null 2>&1
    done
    disk_exists "$1" /usr/share/kubestrap/images/pause.tar && fail "test bug: the archives are still on the disk"
    [ -z "${2:-}" ] || [ -s "$2/pause.tar" ] || fail "test bug: no archives taken from the disk"
}

# The seed disk's images/ is found and imported too: it carries the pause archive only (taken
# from the image), so preflight still fails, naming every image but pause.
scenario_no-images() {
    mkdir -p "$WORK/seed"
    cp_user_data >"$WORK/seed/user-data"
    cp_meta_data >"$WORK/seed/meta-data"
    local disk rc=0 log="$WORK/boot1.serial.log" f p
    disk=$(fresh_disk no-images)
    strip_images "$disk" "$WORK/stripped"
    mkdir -p "$WORK/seed/images"
    mv "$WORK/stripped/pause.tar" "$WORK/seed/images/"
    rm -rf "$WORK/stripped"
    seed_iso
    boot_vm boot1 "$disk" --seed "$WORK/seed.iso" || rc=$?
    expect_rc "$rc" 3 "the report unit saw kubestrap.service fail"
    check_console "$log" "$SCN/no-images/console.tsv"
    for p in /etc/kubernetes/manifests/kube-apiserver.yaml /var/lib/kubelet/config.yaml /var/lib/kubestrap/done-pre-kubelet; do
        if disk_exists "$disk" "$p"; then fail "$p was written although preflight failed"; else say "ok: no $p on the disk"; fi
    done
}

# Three power cuts in a row on one disk, each boot cut (QMP quit: the guest's page cache is lost)
# deeper than the one before, then a boot that converges:
#   boot1: cut as the certs phase starts (attempt 1);
#   boot2: cut as kubeconfig starts (attempt 2 re-ran certs; certs is committed, one syncfs a phase);
#   boot3: cut as the post-kubelet stage starts (attempt 3 finished the pre-kubelet stage);
#   boot4: pre-kubelet skipped, post-kubelet redone, done; every CA that survived a cut kept.
# The CA is generated in the guest (the control-plane fixture gives none): a kept CA is kubestrap's doing.
scenario_power-cuts() {
    mkdir -p "$WORK/seed"
    cp_user_data >"$WORK/seed/user-data"
    cp_meta_data >"$WORK/seed/meta-data"
    seed_iso
    local disk rc=0 n c final log4="$WORK/boot4.serial.log"
    CUT_CAS=() CUT_NOTES=()
    disk=$(fresh_disk node)
    cut_boot "$disk" boot1 certs
    cut_boot "$disk" boot2 kubeconfig
    has_line "$WORK/boot2.serial.log" "$(event_re phase "" certs)" && say "ok: attempt 2 ran the certs phase again" \
        || fail "attempt 2 did not run the certs phase"
    [ -n "$CUT_CA" ] && say "ok: the certs phase was committed before kubeconfig began" || fail "no ca.crt after a cut at kubeconfig"
    # The third cut as post-kubelet begins (its control-plane phase, which writes the
    # controller-manager's and scheduler's manifests once the API server answers, init::in_order):
    # the cut waits for no control plane, which costs ~4 min under TCG twice over.
    cut_boot "$disk" boot3 control-plane post-kubelet
    expect_event "$WORK/boot3.serial.log" "done" pre-kubelet
    rc=0
    boot_vm boot4 "$disk" --seed "$WORK/seed.iso" --append kubestrap.test.pods=0 || rc=$?
    check_cp_boot "$log4" "$rc" pre-skipped no-pods
    final=$(disk_cat "$disk" /etc/kubernetes/pki/ca.crt | sha256sum | cut -c1-16)
    for c in "${CUT_CAS[@]}"; do
        [ "$c" = "$final" ] && say "ok: the CA that survived a cut ($c...) was kept" || fail "the CA $c... that survived a cut was replaced by $final..."
    done
    n=$(disk_cat "$disk" /var/lib/kubestrap/attempts-pre-kubelet | tr -d '[:space:]')
    [ "$n" = 3 ] && say "ok: the pre-kubelet stage converged on attempt 3" || fail "attempts-pre-kubelet is '${n}', want 3"
    SCENARIO_NOTE="cuts after: ${CUT_NOTES[*]}"
    note_timing "$log4" after-power-cuts
}

# cut_boot DISK NAME PHASE [STAGE]: boot DISK, QMP quit as PHASE's event (of STAGE) shows up, check what survived on
# a copy (journal replayed as the next mount would, e2fsck clean); sets CUT_CA (the hash of the
# ca.crt left, or empty) and appends to CUT_CAS and CUT_NOTES.
cut_boot() {
    local disk=$1 n=$2 log="$WORK/$2.serial.log" rc=0 last cut="$WORK/after-cut.ext4"
    boot_vm "$n" "$disk" --seed "$WORK/seed.iso" --quit-on "$(event_re phase "${4:-}" "$3")" || rc=$?
    expect_line "$log" "HARNESS: QMP quit sent" "$n: power cut (QMP quit) as $3 began"
    expect_rc "$rc" 0 "$n: QEMU stopped by QMP quit"
    reject_line "$log" "$(event_re "done" post-kubelet)" "$n: the boot did not finish"
    last=$(grep -E 'KUBESTRAP-EVENT' "$log" | tail -n1 | sed 's/.*KUBESTRAP-EVENT //')
    say "$n: power cut landed after: $last"
    CUT_NOTES+=("$(sed 's/.*"phase":"\([^"]*\)".*"stage":"\([^"]*\)".*/\2:\1/' <<<"$last")")
    cp --sparse=always "$disk" "$cut"
    disk_replay "$cut"
    e2fsck -fn "$cut" >"$WORK/$n.e2fsck.txt" 2>&1 || fail "$n: the file system is inconsistent after the cut ($n.e2fsck.txt)"
    CUT_CA=""
    if disk_exists "$cut" /etc/kubernetes/pki/ca.crt && [ -n "$(disk_cat "$cut" /etc/kubernetes/pki/ca.crt)" ]; then
        CUT_CA=$(disk_cat "$cut" /etc/kubernetes/pki/ca.crt | sha256sum | cut -c1-16)
        CUT_CAS+=("$CUT_CA")
        say "$n: the cut left ca.crt on disk (sha256 $CUT_CA...)"
    else
        say "$n: the cut left no ca.crt on disk"
    fi
    rm -f "$cut"
}

# ---- main ---------------------------------------------------------------------------------
expected_s() { awk -F'\t' -v s="$1" '$1 == s { print $2 }' "$HERE/budget.tsv"; }   # expected_s NAME: budget.tsv's seconds

run_scenario() {
    local s=$1
    declare -F "scenario_$s" >/dev/null || { echo "run.sh: unknown scenario $s (try --list)" >&2; return 2; }
    (
        set -eE
        # no-images strips the as-built image; cp-lifecycle's cp-1 boots it (AS_BUILT_ROOTFS).
        case "$s" in no-images) ;; *) IMAGE_ROOTFS=$PRELOADED_ROOTFS ;; esac
        # A boot's timeout from the budget: twice the scenario's expected time (at least 120 s),
        # at most VM_TIMEOUT; so a hung boot costs minutes, not a quarter of an hour.
        local want
        want=$(expected_s "$s")
        if [ -n "$want" ]; then
            want=$((2 * want < 120 ? 120 : 2 * want))
            VM_TIMEOUT=$((want < VM_TIMEOUT ? want : VM_TIMEOUT))
        fi
        scenario_begin "$s"
        trap 'fail "aborted: line $LINENO: $BASH_COMMAND"' ERR
        trap 'trap - ERR; scenario_end || true; printf "%s\n" "${RESULTS[@]}" >>"$RESULTS_FILE"' EXIT
        "scenario_$s"
    ) || true
}

main() {
    local build=(--test-image) list=() s t0 rc=0
    while [ $# -gt 0 ]; do
        case "$1" in
            --no-build) build+=(--no-cargo) ;;
            --list) printf '%s\n' "${SCENARIOS[@]}" "${EXTRA_SCENARIOS[@]}"; return 0 ;;
            -h|--help) sed -n '2,12p' "$0"; return 0 ;;
            all) list+=("${SCENARIOS[@]}") ;;
            *) list+=("$1") ;;
        esac
        shift
    done
    [ "${#list[@]}" -gt 0 ] || { echo "usage: run.sh [--no-build] all|SCENARIO..." >&2; return 2; }
    [ "$(id -u)" -eq 0 ] || { echo "run.sh: run as root" >&2; return 1; }
    t0=$(now)
    IMAGE_ENV=$("$REPO/image/build.sh" "${build[@]}" | tail -n1)
    # The preloaded variant (the images already in containerd's store): every boot but cp-lifecycle's
    # cp-1 (which proves the imports) and no-images boots it; the same binaries, so no second cargo run.
    PRELOADED_ENV=$("$REPO/image/build.sh" --preloaded --no-cargo | tail -n1)
    PRELOADED_ROOTFS=$(sed -n 's/^IMAGE_ROOTFS=//p' "$PRELOADED_ENV")
    export PRELOADED_ROOTFS
    # shellcheck disable=SC1090
    . "$IMAGE_ENV"
    AS_BUILT_ROOTFS=$IMAGE_ROOTFS
    export AS_BUILT_ROOTFS
    # The previous version's image (preloaded), for the upgrades by image of cp-lifecycle and workers.
    AB_OLD_ROOTFS=$(sed -n 's/^IMAGE_ROOTFS=//p' "$("$REPO/image/build.sh" --preloaded --no-cargo --kube-version "$AB_OLD" | tail -n1)")
    export AB_OLD_ROOTFS
    # The workers' host control plane: the real v1.37.2 binaries (built once, cached).
    HOST_K8S_BIN=$("$REPO/scripts/real-k8s" | tail -n1)
    export HOST_K8S_BIN
    say "images ready in $(ms_to_s "$(($(now) - t0))") s: $IMAGE_ROOTFS, $PRELOADED_ROOTFS"
    RESULTS_FILE=$(mktemp) TIMINGS_FILE=$(mktemp)
    export RESULTS_FILE TIMINGS_FILE
    RESULTS=()
    local tv want
    tv=$(now)
    for s in "${list[@]}"; do
        # The hard guard: a scenario that would end past VM_HARD_S is not started, and fails.
        want=$(expected_s "$s")
        local why=""
        if [ $((($(now) - tv) / 1000 + ${want:-0})) -gt "$VM_HARD_S" ]; then
            why="the VM budget is spent (VM_HARD_S=$VM_HARD_S s)"
        elif [ -n "${VM_DEADLINE:-}" ] && [ $(($(date +%s) + ${want:-0})) -gt "$VM_DEADLINE" ]; then
            why="it would end past CI's deadline ($((VM_DEADLINE - $(date +%s))) s left, $want s expected)"
        fi
        if [ -n "$why" ]; then
            case " ${VM_DEFERRABLE:-} " in
                *" $s "*) echo "DEFER $s 0.000s 0 boots: skipped, $why" >>"$RESULTS_FILE" ;;
                *) echo "FAIL $s 0.000s 0 boots: skipped, $why" >>"$RESULTS_FILE" ;;
            esac
            continue
        fi
        run_scenario "$s" || rc=2
    done
    echo "==== kubestrap VM tests ($(ms_to_s "$(($(now) - t0))") s total, accel=$VM_ACCEL) ===="
    cat "$RESULTS_FILE"
    # The suite's budget: VM_BUDGET_S, default the scenarios' expectations and a quarter (3400 s
    # for `all`).
    local budget=${VM_BUDGET_S:-}
    if [ -z "$budget" ]; then
        budget=$(for s in "${list[@]}"; do expected_s "$s"; done | awk '{ t += $1 } END { printf "%d", t * 1.25 }')
    fi
    echo "---- time budget (budget.tsv; the suite: $budget s) ----"
    VM_BUDGET_S=$budget "$HERE/budget.sh" "$RESULTS_FILE" || rc=1
    if [ -s "$TIMINGS_FILE" ]; then
        echo "---- kubestrap done (post-kubelet): since QEMU start, since kernel start; unit run times ----"
        cat "$TIMINGS_FILE"
    fi
    grep -q '^FAIL' "$RESULTS_FILE" && rc=1
    [ "$(grep -c '^PASS\|^DEFER' "$RESULTS_FILE")" -eq "${#list[@]}" ] || rc=1
    if [ -n "${VM_RESULTS_OUT:-}" ]; then cp "$RESULTS_FILE" "$VM_RESULTS_OUT"; fi
    rm -f "$RESULTS_FILE" "$TIMINGS_FILE"
    return "$rc"
}

# Sourced (bench-cloud-init.sh reuses the user-data and host control plane): define only.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then main "$@"; fi
