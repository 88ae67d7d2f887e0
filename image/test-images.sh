#!/usr/bin/env bash
# TEST IMAGE ONLY: the container images kubeadm v1.37 names for the default configuration, built
# locally as one-layer OCI archives from the real-k8s builds (no registry is reachable here) and
# tagged exactly as `kubeadm config images list` prints them, so the real kubelet runs
# kubestrap's static Pod manifests and addons unchanged.
#   image/test-images.sh BIN_DIR ROOTFS_DIR OUT_DIR [VERSION KUBE_BIN_DIR]
# BIN_DIR: scripts/real-k8s's bin directory; ROOTFS_DIR: the guest root (kube-proxy's image
# takes Debian's iptables and the libraries it links from there); OUT_DIR: one NAME.tar each.
# VERSION (default v1.37.2): the images of that Kubernetes version, as kubeadm 1.37 names them
# (its etcd, CoreDNS and pause for v1.36 are v1.37's), kube-* built from KUBE_BIN_DIR's binaries.
set -euo pipefail
BIN=$1 ROOT=$2 OUT=$3 VERSION=${4:-v1.37.2} KBIN=${5:-$1}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OCI="$HERE/../realk8s/images/oci_archive.py"
mkdir -p "$OUT"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# kube-proxy runs iptables-restore (iptables mode, kubeadm's default): the nft backend, its
# extensions and libraries, with the alternatives resolved to plain symlinks.
proxy_tree() {
    local t=$WORK/proxy f lib
    mkdir -p "$t/usr/sbin" "$t/usr/lib/x86_64-linux-gnu"
    cp -a "$ROOT/usr/sbin/xtables-nft-multi" "$t/usr/sbin/"
    for f in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
        ln -s xtables-nft-multi "$t/usr/sbin/$f"
    done
    cp -a "$ROOT/usr/lib/x86_64-linux-gnu/xtables" "$t/usr/lib/x86_64-linux-gnu/"
    for lib in $(chroot "$ROOT" ldd /usr/sbin/xtables-nft-multi | grep -o '/[^ ]*'); do
        mkdir -p "$t$(dirname "$lib")"
        cp -L "$ROOT$lib" "$t$lib"
    done
    echo "$t"
}

while read -r name; do
    base=${name#registry.k8s.io/}; base=${base%%:*}; base=${base##*/}
    out="$OUT/$base.tar"
    case "$base" in
        kube-apiserver|kube-controller-manager|kube-scheduler)
            args=(--entrypoint "/usr/local/bin/$base" "$KBIN/$base:/usr/local/bin/$base") ;;
        kube-proxy)
            args=(--entrypoint /usr/local/bin/kube-proxy "$KBIN/kube-proxy:/usr/local/bin/kube-proxy" "$(proxy_tree):/") ;;
        etcd)
            args=(--entrypoint /usr/local/bin/etcd "$BIN/etcd:/usr/local/bin/etcd" "$BIN/etcdctl:/usr/local/bin/etcdctl") ;;
        coredns)
            args=(--entrypoint /coredns "$BIN/coredns:/coredns") ;;
        pause)
            args=(--entrypoint /pause --user 65535:65535 "$BIN/pause:/pause") ;;
        *) echo "test-images.sh: no recipe for $name" >&2; exit 1 ;;
    esac
    python3 "$OCI" "$name" "$out" "${args[@]}"
    echo "$name -> $out ($(du -h "$out" | cut -f1))"
done < <(unshare -n "$BIN/kubeadm" config images list --kubernetes-version "$VERSION" 2>/dev/null)
