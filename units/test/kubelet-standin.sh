#!/bin/sh
# TEST IMAGE ONLY: the body of kubelet.service (see there). Waits for the control-plane files,
# then execs kube-double as API server + kubelet healthz, registering this node. The node name
# is the kubelet's: --hostname-override from kubeadm-flags.env, else the hostname.
set -eu
manifest=/etc/kubernetes/manifests/kube-apiserver.yaml
cert=/etc/kubernetes/pki/apiserver.crt
while [ ! -f "$manifest" ] || [ ! -f "$cert" ]; do
    sleep 0.5
done
node=$(sed -n 's/.*--hostname-override=\([^ "]*\).*/\1/p' /var/lib/kubelet/kubeadm-flags.env 2>/dev/null || true)
[ -n "$node" ] || node=$(hostname)
echo "kubelet stand-in: starting kube-double for node $node"
exec /usr/local/bin/kube-double --pki-dir /etc/kubernetes/pki --listen 0.0.0.0:6443 --kubelet \
    --register-node "$node"
