#!/usr/bin/env bash
# Install (idempotently) the host tools the image recipe and the QEMU harness need.
# Usage: image/install-host-deps.sh      (as root; also sourceable: defines install_host_deps)
set -euo pipefail

KUBESTRAP_HOST_PKGS=(mmdebstrap qemu-system-x86 qemu-utils xorriso busybox-static cpio kmod
    e2fsprogs dosfstools zstd socat curl openssl iproute2 ca-certificates)

install_host_deps() {
    local missing=() p
    for p in "${KUBESTRAP_HOST_PKGS[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    if [ "${#missing[@]}" -eq 0 ]; then
        return 0
    fi
    echo "install-host-deps: installing ${missing[*]}" >&2
    local sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    install_host_deps
fi
