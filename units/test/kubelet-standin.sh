#!/bin/sh
# TEST IMAGE ONLY: the body of kubelet.service (see there). Not a kubelet: it does the few
# things kubestrap needs from one on a control plane.
#  - etcd: once /etc/kubernetes/manifests/etcd.yaml exists (init writes it before the kubelet
#    starts; a joining control plane's etcd-join writes it later), runs the real etcd (Debian's
#    3.4) with the manifest's flags, minus those etcd 3.4 does not know (as tests/common/etcd.rs).
#  - the API server: once the kube-apiserver manifest and apiserver.crt exist, execs kube-double
#    on this node's PKI (API on :6443, kubelet /healthz on 127.0.0.1:10248), registering this
#    node and mirroring its static Pods (the etcd Pod's advertise-client-urls annotation is what
#    a joining control plane's etcd-join reads).
#  - when admin.conf points at an API server on another machine (a joining control plane: the
#    cluster's API is the init node's kube-double), registers this node there with the
#    kubelet's client certificate, so that mark-control-plane finds its Node.
# The node name is the kubelet's: --hostname-override from kubeadm-flags.env, else the hostname.
set -eu
manifests=/etc/kubernetes/manifests
pki=/etc/kubernetes/pki
manifest=$manifests/kube-apiserver.yaml
cert=$pki/apiserver.crt

# etcd_args MANIFEST: the etcd command's flags, one per line, without those newer than 3.4.
etcd_args() {
    awk '/^ *- etcd$/ { on = 1; next } on && /^ *- --/ { sub(/^ *- /, ""); print; next } on { exit }' "$1" \
        | grep -v -e '^--feature-gates=' -e '^--watch-progress-notify-interval='
}

run_etcd() {
    while [ ! -f "$manifests/etcd.yaml" ]; do
        sleep 0.5
    done
    echo "kubelet stand-in: starting etcd from $manifests/etcd.yaml"
    # One flag per line, none with spaces (kubeadm's etcd flags are --name=value).
    # shellcheck disable=SC2046
    set -- $(etcd_args "$manifests/etcd.yaml")
    while :; do
        /usr/bin/etcd "$@" >>/var/log/etcd-standin.log 2>&1 || true
        echo "kubelet stand-in: etcd exited (/var/log/etcd-standin.log); restarting in 2 s"
        sleep 2
    done
}

# kubeconfig_field FILE KEY: the first value of KEY in a kubeconfig.
kubeconfig_field() { sed -n "s/^ *$2: *//p" "$1" | head -n1; }

register_remote() {
    # The kubelet's credentials, at the cluster's API as admin.conf names it: since kubeadm 1.35
    # kubelet.conf points at this node's own API server, which on a joining control plane is a
    # kube-double of its own here (not sharing the init node's state, as real API servers would).
    conf=/etc/kubernetes/kubelet.conf admin=/etc/kubernetes/admin.conf node=$1
    while [ ! -f "$conf" ] || [ ! -f "$admin" ]; do
        sleep 0.5
    done
    server=$(kubeconfig_field "$admin" server)
    hostport=${server#https://}
    host=${hostport%:*}
    if ip -o addr show | grep -q " inet $host/"; then
        return 0   # the cluster's API is this machine's kube-double: registered at its start
    fi
    crt=$(kubeconfig_field "$conf" client-certificate)
    key=$(kubeconfig_field "$conf" client-key)
    if [ -z "$crt" ]; then
        crt=/run/kubelet-standin-client.crt key=/run/kubelet-standin-client.key
        kubeconfig_field "$conf" client-certificate-data | base64 -d >"$crt"
        kubeconfig_field "$conf" client-key-data | base64 -d >"$key"
    fi
    body='{"apiVersion":"v1","kind":"Node","metadata":{"name":"'$node'","labels":{"kubernetes.io/hostname":"'$node'","kubernetes.io/os":"linux","kubernetes.io/arch":"amd64"}},"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet stand-in"}]}}'
    while :; do
        status=$( { printf 'POST /api/v1/nodes HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %s\r\nConnection: close\r\n\r\n%s' \
            "$hostport" "${#body}" "$body"; sleep 5; } \
            | timeout 10 openssl s_client -quiet -verify_return_error -verify_ip "$host" -CAfile "$pki/ca.crt" \
                -cert "$crt" -key "$key" -connect "$hostport" 2>/dev/null | head -n1 | tr -d '\r') || true
        case "$status" in
            "HTTP/1.1 201"* | "HTTP/1.1 409"*)
                echo "kubelet stand-in: registered node $node with the API at $hostport ($status)"
                return 0 ;;
        esac
        echo "kubelet stand-in: registering node $node at $hostport: ${status:-no answer}; retrying"
        sleep 2
    done
}

if [ -x /usr/bin/etcd ]; then
    run_etcd &
fi
while [ ! -f "$manifest" ] || [ ! -f "$cert" ]; do
    sleep 0.5
done
node=$(sed -n 's/.*--hostname-override=\([^ "]*\).*/\1/p' /var/lib/kubelet/kubeadm-flags.env 2>/dev/null || true)
[ -n "$node" ] || node=$(hostname)
register_remote "$node" &
echo "kubelet stand-in: starting kube-double for node $node"
exec /usr/local/bin/kube-double --pki-dir /etc/kubernetes/pki --listen 0.0.0.0:6443 --kubelet \
    --register-node "$node" --static-pods "$manifests"
