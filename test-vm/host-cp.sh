# shellcheck shell=bash
# A real control plane on the host, for worker VMs to join: `kubestrap init --root` writes it,
# and etcd, the API server, the controller manager and the scheduler run from its static Pod
# manifests as a kubelet would run them: the real v1.37.2 binaries (scripts/real-k8s) with the
# manifests' command lines, in a private mount namespace with the node root's /etc/kubernetes and
# /var/lib/etcd over the host paths, restarted when they exit. The host runs no kubelet, so init
# skips the phases that need one; natively, this control plane is up in seconds and never
# starves beside TCG guests as a control-plane VM did. Sourced by run.sh.

# The static Pod's process: mounts the node root's directories, then execs the command.
HOST_CP_BIND='set -e
while [ "$1" != -- ]; do mkdir -p "$2"; mount --bind "$1" "$2"; shift 2; done
shift; exec "$@"'

# host_cp_argv MANIFEST: the container's command and args, NUL-separated.
host_cp_argv() {
    python3 -c 'import sys, yaml
c = yaml.safe_load(open(sys.argv[1]))["spec"]["containers"][0]
sys.stdout.write("\0".join(c.get("command", []) + c.get("args", [])))' "$1"
}

# host_cp_pod NS ROOT NAME: run ROOT's manifest NAME in NS, restarted as the kubelet would (1 s
# back-off); its output goes to $WORK/host-NAME.log.
host_cp_pod() {
    local ns=$1 root=$2 name=$3 argv i
    mapfile -d '' argv < <(host_cp_argv "$root/etc/kubernetes/manifests/$name.yaml")
    argv[0]="$HOST_K8S_BIN/${argv[0]}"
    [ -x "${argv[0]}" ] || { fail "host control plane: no ${argv[0]} (scripts/real-k8s builds it)"; return 1; }
    mkdir -p "$root/var/lib/etcd"
    # setsid may fork: the loop records its own process group (its pid) for the cleanup.
    setsid bash -c 'echo $$ >"$0"; while :; do "$@"; echo "exited: $?"; sleep 1; done' "$WORK/host-$name.pgid" \
        ip netns exec "$ns" unshare --mount --propagation private sh -c "$HOST_CP_BIND" sh \
        "$root/etc/kubernetes" /etc/kubernetes "$root/var/lib/etcd" /var/lib/etcd -- "${argv[@]}" \
        >>"$WORK/host-$name.log" 2>&1 </dev/null &
    disown "$!"   # no "Killed" notice when the cleanup ends it
    for ((i = 0; i < 50; i++)); do [ -s "$WORK/host-$name.pgid" ] && break; sleep 0.1; done
    CLEANUPS+=("kill -KILL -- -$(cat "$WORK/host-$name.pgid") 2>/dev/null")
}

# host_cp_init NS ROOT CONFIG: kubestrap init of the host's control plane in NS; its manifests
# run before the API calls start (init in two runs: files, then the API objects).
host_cp_init() {
    local ns=$1 root=$2 config=$3 kc i p
    local files=preflight,kubelet-start,wait-control-plane,mark-control-plane,kubelet-finalize
    ip netns exec "$ns" "$BIN_DIR/kubestrap" init --config "$config" --root "$root" \
        --skip-phases "$files,upload-config,upload-certs,bootstrap-token,addon,show-join-command" \
        >"$WORK/host-init.log" 2>&1 || { fail "host control plane: init's files failed (host-init.log)"; return 1; }
    for p in etcd kube-apiserver kube-controller-manager kube-scheduler; do host_cp_pod "$ns" "$root" "$p" || return 1; done
    kc=(ip netns exec "$ns" "$HOST_K8S_BIN/kubectl" --kubeconfig "$root/etc/kubernetes/admin.conf")
    for ((i = 0; i < 120; i++)); do
        "${kc[@]}" get --raw /readyz >/dev/null 2>&1 && break
        sleep 0.5
    done
    ip netns exec "$ns" "$BIN_DIR/kubestrap" init --config "$config" --root "$root" --skip-phases "$files" \
        >>"$WORK/host-init.log" 2>&1 || { fail "host control plane: init failed (host-init.log)"; return 1; }
    say "host: a real control plane in $ns is up ($(grep -c . "$WORK/host-init.log") lines of init, host-init.log)"
}

# host_kubectl ARGS...: the real kubectl as the host control plane's admin.
host_kubectl() { ip netns exec "$NS" "$HOST_K8S_BIN/kubectl" --kubeconfig "$WORK/cp/etc/kubernetes/admin.conf" "$@"; }

# host_signed_csrs: how many kubelet client CSRs from the bootstrap token abcdef the controller
# manager approved and signed.
host_signed_csrs() {
    host_kubectl get csr -o jsonpath='{range .items[*]}{.spec.username} {.spec.signerName} {.status.conditions[0].type} {.status.certificate}{"\n"}{end}' 2>>"$WORK/host-kubectl.log" \
        | awk '$1 == "system:bootstrap:abcdef" && $2 == "kubernetes.io/kube-apiserver-client-kubelet" && $3 == "Approved" && $4 != ""' | wc -l
}
