#!/usr/bin/env bash
# Build the kubestrap VM image: Debian bookworm (mmdebstrap) + Debian kernel + busybox initramfs,
# with the static kubestrap binary and units/*.service baked in; an ext4 root packed with
# `mkfs.ext4 -d` (no loop device, no mount).
#
#   image/build.sh [--test-image] [--no-cargo] [--units-dir DIR] [--out DIR] [--rebuild-base]
#                  [--preloaded] [--kube-version VERSION]
#
# Stage 1 (cached by a hash of suite + packages + kernel + modules + the stage-1 code of this
# script + initramfs-init + image/rootfs/):
#   base rootfs tar, vmlinuz, initramfs  -> $CACHE/base-<key>/
# Stage 2 (cached by a hash of stage 1 + binaries + units + variant):
#   rootfs.ext4 + image.env              -> $OUT (default $CACHE/image-prod or image-test)
# CACHE = ${XDG_CACHE_HOME:-$HOME/.cache}/kubestrap/vm. Prints the path of image.env last.
# --test-image also bakes a real node: the real kubelet, kubeadm, kubectl, etcdctl, containerd v2,
# runc and CNI plugins from scripts/real-k8s (built there, cached), image/test-node/ (containerd
# and CNI config, kubeadm's kubelet.service), the images kubeadm names as OCI archives in
# /usr/share/kubestrap/images (image/test-images.sh), and units/test/ (the report unit, the
# multi-VM LAN's .network files).
# --kube-version VERSION (a test image of another version of scripts/real-k8s's matrix, for an
# upgrade by image): that version's kubelet, kubeadm, kubectl and kube-* images; the rest (etcd,
# CoreDNS, pause, containerd, runc, CNI) as the newest's, as kubeadm 1.37 names them.
# KUBESTRAP_BIN_DIR=DIR bakes prebuilt static binaries from DIR instead (no cargo run).
# Needs root (mmdebstrap, ownership in mkfs.ext4 -d).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
# shellcheck source=install-host-deps.sh
. "$HERE/install-host-deps.sh"

SUITE=bookworm
MIRROR=${KUBESTRAP_MIRROR:-http://deb.debian.org/debian}
# Fixed timestamps/UUIDs so that the same inputs give the same image.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1735689600}   # 2025-01-01T00:00:00Z
FS_UUID=6b756265-7374-7261-7000-000000000001
IMAGE_SIZE=${KUBESTRAP_IMAGE_SIZE:-4G}   # sparse; preflight warns below 2 GiB free under /var/lib
# conntrack, socat, ethtool: what kubeadm's preflight (and kube-proxy/port-forward) look for.
PACKAGES=(systemd systemd-sysv udev containerd iproute2 iptables mount util-linux kmod
    ca-certificates conntrack socat ethtool)
# KUBESTRAP_EXTRA_PACKAGES="a b": more packages (e.g. cloud-init for bench-cloud-init.sh); part
# of the cache key, so such a base is cached separately.
read -r -a EXTRA <<<"${KUBESTRAP_EXTRA_PACKAGES:-}"
PACKAGES+=("${EXTRA[@]}")
# Modules in the rootfs (dependencies are added). virtio + storage + isofs/vfat for cidata,
# fw_cfg for credentials, overlay/bridge/netfilter for containerd and kubeadm's preflight.
ROOTFS_MODULES=(virtio_pci virtio_blk virtio_net virtio_rng virtio_console virtio_scsi ext4
    crc32c_generic crc32c-intel isofs cdrom sr_mod ata_piix vfat nls_cp437 nls_ascii
    nls_iso8859-1 nls_utf8 qemu_fw_cfg overlay autofs4 br_netfilter bridge veth nf_conntrack
    nf_nat ip_tables iptable_filter iptable_nat nf_tables nft_compat nft_chain_nat
    xt_conntrack xt_MASQUERADE xt_comment xt_mark xt_statistic xt_addrtype xt_nat xt_multiport
    xt_physdev nft_ct nft_masq nft_redir nft_nat nft_reject_inet nft_fib_inet nf_conntrack_netlink)
# Modules the initramfs insmods, in this order (dependencies first, resolved below).
INITRD_MODULES=(crc32c_generic crc32c-intel ext4 virtio_pci virtio_blk qemu_fw_cfg)
MASKED_UNITS=(systemd-firstboot.service getty.target getty@.service serial-getty@.service
    getty-static.service console-getty.service apt-daily.timer apt-daily-upgrade.timer
    e2scrub_all.timer fstrim.timer dpkg-db-backup.timer)

TEST_IMAGE=0 PRELOADED=0 CARGO=1 REBUILD_BASE=0 OUT='' UNITS_DIR="$REPO/units" KUBE_VERSION=
while [ $# -gt 0 ]; do
    case "$1" in
        --test-image) TEST_IMAGE=1 ;;
        --preloaded) TEST_IMAGE=1 PRELOADED=1 ;;
        --no-cargo) CARGO=0 ;;
        --rebuild-base) REBUILD_BASE=1 ;;
        --units-dir) UNITS_DIR=$(cd "$2" && pwd); shift ;;
        --out) OUT=$2; shift ;;
        --kube-version) TEST_IMAGE=1 KUBE_VERSION=$2; shift ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        *) echo "build.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/kubestrap/vm
# The test image's containerd holds the preloaded images twice (content store + snapshots).
[ "$TEST_IMAGE" = 1 ] && IMAGE_SIZE=${KUBESTRAP_IMAGE_SIZE:-8G}
VARIANT=prod
[ "$TEST_IMAGE" = 1 ] && VARIANT='test'
[ "$PRELOADED" = 1 ] && VARIANT='test-preloaded'
[ -n "$KUBE_VERSION" ] && VARIANT="$VARIANT-$KUBE_VERSION"
OUT=${OUT:-$CACHE/image-$VARIANT}
BIN_DIR=${KUBESTRAP_BIN_DIR:-$REPO/target/x86_64-unknown-linux-gnu/release}   # override: prebuilt binaries

log() { printf '[image %6.1fs] %s\n' "$(( ${EPOCHREALTIME/./} / 100000 - T0 ))e-1" "$*" >&2; }
T0=$(( ${EPOCHREALTIME/./} / 100000 ))
die() { echo "build.sh: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (mmdebstrap and mkfs.ext4 -d need real ownership)"
install_host_deps

# ---- inputs -----------------------------------------------------------------------------
KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9].*-amd64\)$/\1/p' | head -n1)
[ -n "$KPKG" ] || die "cannot resolve linux-image-amd64 (apt-get update?)"
KVER=${KPKG#linux-image-}

hash_inputs() {
    {
        printf '%s\n' "$SUITE" "$MIRROR" "$KPKG" "$SOURCE_DATE_EPOCH" "${PACKAGES[@]}" \
            "${ROOTFS_MODULES[@]}" "${INITRD_MODULES[@]}" "${MASKED_UNITS[@]}"
        sed -n '/^# ---- stage 1/,/^# ---- stage 2/p' "$HERE/build.sh"
        cat "$HERE/initramfs-init"
        (cd "$HERE/rootfs" && find . -type f | LC_ALL=C sort | xargs -d '\n' sha256sum)
    } | sha256sum | cut -c1-16
}
KEY=$(hash_inputs)
BASE="$CACHE/base-$KEY"
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9   # one build at a time per cache

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kubestrap-image.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# ---- stage 1: base rootfs, kernel, initramfs ---------------------------------------------
copy_modules() {   # copy_modules KROOT DEST MODULE... ; prints module paths in load order
    local kroot=$1 dest=$2 m line path
    shift 2
    for m in "$@"; do
        if ! modprobe -d "$kroot" -S "$KVER" --show-depends "$m" 2>/dev/null >"$WORK/deps"; then
            echo "build.sh: warning: module $m not in $KPKG" >&2
            continue
        fi
        while read -r line; do
            case "$line" in
                insmod\ *) path=${line#insmod }; path=${path%% *} ;;
                *) continue ;;
            esac
            path=${path#"$kroot"}
            mkdir -p "$dest$(dirname "$path")"
            cp -n "$kroot$path" "$dest$path"
            echo "$path"
        done <"$WORK/deps"
    done
}

build_base() {
    local tmp="$BASE.tmp" r="$WORK/root" k="$WORK/kernel" i="$WORK/initrd" u
    rm -rf "$tmp" && mkdir -p "$tmp"
    log "mmdebstrap $SUITE (${PACKAGES[*]})"
    mmdebstrap --quiet --variant=essential --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
        --include="$(IFS=,; echo "${PACKAGES[*]}")" \
        --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
        --dpkgopt='path-include=/usr/share/locale/locale.alias' \
        --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --dpkgopt='path-exclude=/usr/share/info/*' \
        "$SUITE" "$r" "$MIRROR" "deb $MIRROR $SUITE-updates main" \
        "deb http://deb.debian.org/debian-security $SUITE-security main" >"$WORK/mmdebstrap.log" 2>&1 \
        || { tail -n 40 "$WORK/mmdebstrap.log" >&2; die "mmdebstrap failed"; }

    log "kernel $KPKG"
    (cd "$WORK" && apt-get download -q -o APT::Sandbox::User=root "$KPKG" >/dev/null)
    dpkg-deb -x "$WORK"/linux-image-*.deb "$k"
    cp "$k/boot/vmlinuz-$KVER" "$tmp/vmlinuz"
    # The kernel's config where a Debian kernel package puts it: kubeadm's SystemVerification
    # (and ours) read it; without it kubeadm's preflight fails.
    mkdir -p "$r/boot"
    cp "$k/boot/config-$KVER" "$r/boot/config-$KVER"
    depmod -b "$k" "$KVER"
    copy_modules "$k" "$r" "${ROOTFS_MODULES[@]}" >/dev/null
    cp "$k/lib/modules/$KVER"/modules.{order,builtin,builtin.modinfo} "$r/lib/modules/$KVER/"
    depmod -b "$r" "$KVER"

    log "customize rootfs"
    cp -a "$HERE/rootfs/." "$r/"
    rm -f "$r/etc/hostname"                     # the node name comes from meta-data
    # /usr is read-only at run time: the controller-manager's flexvolume hostPath must exist.
    mkdir -p "$r/usr/libexec/kubernetes/kubelet-plugins/volume/exec"
    echo uninitialized >"$r/etc/machine-id"     # empty is NOT a first boot (systemd >= 250)
    for u in "${MASKED_UNITS[@]}"; do ln -sfn /dev/null "$r/etc/systemd/system/$u"; done
    mkdir -p "$r/etc/systemd/system/multi-user.target.wants" "$r/etc/systemd/system/sockets.target.wants" \
        "$r/etc/systemd/system/network-online.target.wants"
    ln -sfn /usr/lib/systemd/system/systemd-networkd.service "$r/etc/systemd/system/multi-user.target.wants/"
    ln -sfn /usr/lib/systemd/system/systemd-networkd.socket "$r/etc/systemd/system/sockets.target.wants/"
    ln -sfn /usr/lib/systemd/system/systemd-networkd-wait-online.service "$r/etc/systemd/system/network-online.target.wants/"
    ln -sfn /usr/lib/systemd/system/systemd-networkd.service "$r/etc/systemd/system/dbus-org.freedesktop.network1.service"
    rm -rf "$r/var/cache/apt/archives/"*.deb "$r/var/lib/apt/lists/"* "$r/var/log/"*.log
    chroot "$r" dpkg-query -W -f='${Package} ${Version}\n' >"$tmp/packages.txt"
    tar --numeric-owner --xattrs --xattrs-include='*' --sort=name --mtime="@$SOURCE_DATE_EPOCH" \
        --clamp-mtime -C "$r" -cf "$tmp/rootfs.tar" .

    log "initramfs"
    mkdir -p "$i"/{bin,dev,proc,sys,newroot,lib/modules}
    cp /bin/busybox "$i/bin/busybox"
    file -L "$i/bin/busybox" | grep -q 'statically linked' || die "/bin/busybox is not static (busybox-static)"
    install -m 0755 "$HERE/initramfs-init" "$i/init"
    copy_modules "$k" "$i" "${INITRD_MODULES[@]}" | sed "s|^/lib/modules/||" | awk '!seen[$0]++' >"$i/modules.list"
    (cd "$i" && find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0 --reproducible) \
        | zstd -q -3 >"$tmp/initrd.img"
    echo "$KVER" >"$tmp/kver"
    rm -rf "$r" "$k" "$i"
    mv "$tmp" "$BASE"
    # Drop bases unused for a week (other package sets, older recipes).
    find "$CACHE" -maxdepth 1 -name 'base-*' ! -name "base-$KEY" -mtime +7 -exec rm -rf {} +
}

if [ "$REBUILD_BASE" = 1 ]; then rm -rf "$BASE"; fi
if [ -f "$BASE/rootfs.tar" ] && [ -f "$BASE/initrd.img" ] && [ -f "$BASE/vmlinuz" ]; then
    log "base cached: $BASE"
    touch "$BASE"
else
    build_base
    log "base built: $BASE"
fi

# ---- stage 2: the image with kubestrap baked in ------------------------------------------
# host_preload ROOT: the test-preloaded variant. The image's archives imported, on this host (an
# import under TCG takes minutes), into the image's own /var/lib/containerd by the same
# containerd and ctr, as an image builder would: at first boot kubestrap finds every image
# present and skips them. Only cp-init proves the import itself; the other scenarios boot this.
host_preload() {
    local root=$1 st="$WORK/containerd" pid a i
    mkdir -p "$st"
    cat >"$st/config.toml" <<EOF
version = 3
root = "$root/var/lib/containerd"
state = "$st/run"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$st/containerd.sock"
[ttrpc]
  address = "$st/containerd.sock.ttrpc"
EOF
    unshare -m "$REAL_BIN/containerd" --config "$st/config.toml" >"$st/log" 2>&1 &
    pid=$!
    for ((i = 0; i < 300; i++)); do [ -S "$st/containerd.sock" ] && break; sleep 0.1; done
    [ -S "$st/containerd.sock" ] || { tail -n 20 "$st/log" >&2; die "host containerd did not start"; }
    for a in "$root"/usr/share/kubestrap/images/*.tar; do
        "$REAL_BIN/ctr" --address "$st/containerd.sock" -n k8s.io images import \
            --label io.cri-containerd.image=managed "$a" >/dev/null 2>"$st/ctr.err" \
            || { cat "$st/ctr.err" >&2; kill "$pid"; die "ctr import $a failed"; }
    done
    kill "$pid"
    wait "$pid" || true
}

if [ "$CARGO" = 1 ] && [ -z "${KUBESTRAP_BIN_DIR:-}" ]; then
    log "cargo build --release -p kubestrap"
    (cd "$REPO" && cargo build --quiet --release -p kubestrap)
fi
BINS=("$BIN_DIR/kubestrap")
for b in "${BINS[@]}"; do
    [ -x "$b" ] || die "$b missing (cargo build --release -p kubestrap)"
    if readelf -lW "$b" | grep -q 'INTERP'; then die "$b is dynamically linked (needs +crt-static)"; fi
done

shopt -s nullglob
UNIT_FILES=("$UNITS_DIR"/*.service "$UNITS_DIR"/*.socket "$UNITS_DIR"/*.timer)
DROPIN_DIRS=("$UNITS_DIR"/*.d)
TEST_FILES=()
[ "$TEST_IMAGE" = 1 ] && TEST_FILES=("$REPO"/units/test/*.service "$REPO"/units/test/*.sh
    "$REPO"/units/test/network/*.network "$HERE"/test-node/* "$HERE/test-images.sh"
    "$REPO/realk8s/images/oci_archive.py")
shopt -u nullglob
[ "${#UNIT_FILES[@]}" -gt 0 ] || die "no units in $UNITS_DIR"

# The test image's real node: scripts/real-k8s's builds (it builds what is missing, cached).
REAL_FILES=()
if [ "$TEST_IMAGE" = 1 ]; then
    REAL_BIN=$("$REPO/scripts/real-k8s" | tail -n1)
    # KUBE_BIN: the kubelet, kubeadm, kubectl and kube-* of the image's version.
    KUBE_BIN=$REAL_BIN
    [ -z "$KUBE_VERSION" ] || KUBE_BIN=$("$REPO/scripts/real-k8s" --print "$KUBE_VERSION") || die "no real-k8s build of $KUBE_VERSION"
    REAL_FILES=("$KUBE_BIN"/{kubelet,kubeadm,kubectl} "$REAL_BIN"/{etcdctl,containerd,containerd-shim-runc-v2,ctr,runc}
        "$KUBE_BIN"/{kube-apiserver,kube-controller-manager,kube-scheduler,kube-proxy} "$REAL_BIN"/{etcd,coredns,pause}
        "$REAL_BIN"/cni/{bridge,host-local,loopback,portmap})
    for f in "${REAL_FILES[@]}"; do [ -x "$f" ] || die "$f missing (scripts/real-k8s)"; done
fi

# The kubestrap binary is not part of the key: a commit that changes only Rust reuses the
# assembled image and swaps the binary in (inject_bins below), instead of reassembling 4-8 G.
IMG_KEY=$( { echo "$KEY $VARIANT $IMAGE_SIZE"; sha256sum "${UNIT_FILES[@]}" "${TEST_FILES[@]}" "${REAL_FILES[@]}";
    for d in "${DROPIN_DIRS[@]}"; do find "$d" -type f | LC_ALL=C sort | xargs -d '\n' sha256sum; done; } \
    | sed "s| $REPO/| |" | sha256sum | cut -c1-16)
BIN_SUM=$(sha256sum "$BIN_DIR/kubestrap" | cut -c1-64)
# inject_bins: the current kubestrap into the cached image's /usr/bin/kubestrap (debugfs writes
# the file system offline: no mount, no loop device), mode/owner/mtime as the assembly sets
# them; its hash recorded in image.env, so an unchanged binary is not written again.
inject_bins() {
    local img="$OUT/rootfs.ext4" f=/usr/bin/kubestrap
    grep -qx "KUBESTRAP_SHA256=$BIN_SUM" "$OUT/image.env" && return 0
    debugfs -w -f - "$img" >"$WORK/debugfs.log" 2>&1 <<EOF
rm $f
write $BIN_DIR/kubestrap $f
set_inode_field $f mode 0100755
set_inode_field $f uid 0
set_inode_field $f gid 0
set_inode_field $f mtime @$SOURCE_DATE_EPOCH
EOF
    [ "$(debugfs -R "cat $f" "$img" 2>/dev/null | sha256sum | cut -c1-64)" = "$BIN_SUM" ] \
        || { cat "$WORK/debugfs.log" >&2; die "injecting kubestrap into $img failed"; }
    sed -i '/^KUBESTRAP_SHA256=/d' "$OUT/image.env"
    echo "KUBESTRAP_SHA256=$BIN_SUM" >>"$OUT/image.env"
    log "kubestrap ${BIN_SUM:0:16} injected into the cached image"
}
if [ -f "$OUT/image.env" ] && grep -qx "IMAGE_KEY=$IMG_KEY" "$OUT/image.env" && [ -f "$OUT/rootfs.ext4" ]; then
    log "image cached: $OUT"
    inject_bins
    echo "$OUT/image.env"
    exit 0
fi

log "assemble $VARIANT image"
r="$WORK/root"
mkdir -p "$r"
tar --numeric-owner --xattrs --xattrs-include='*' -C "$r" -xf "$BASE/rootfs.tar"
install -m 0755 "$BIN_DIR/kubestrap" "$r/usr/bin/kubestrap"
ln -sfn /usr/bin/kubestrap "$r/usr/local/bin/kubestrap"
sysd="$r/usr/lib/systemd/system" wants="$r/etc/systemd/system/multi-user.target.wants"
enable_unit() {   # enable_unit FILE: install into /usr/lib/systemd/system, wants/requires-symlink it
    local f=$1 n t
    n=$(basename "$f")
    install -m 0644 "$f" "$sysd/$n"
    case "$n" in *@.*) return 0 ;; esac
    t=$(sed -n 's/^WantedBy=\(.*\)$/\1/p' "$f" | tr ' ' '\n' | grep -v '^$' || true)
    for t in ${t:-multi-user.target}; do
        mkdir -p "$r/etc/systemd/system/$t.wants"
        ln -sfn "/usr/lib/systemd/system/$n" "$r/etc/systemd/system/$t.wants/$n"
    done
    for t in $(sed -n 's/^RequiredBy=\(.*\)$/\1/p' "$f"); do
        mkdir -p "$r/etc/systemd/system/$t.requires"
        ln -sfn "/usr/lib/systemd/system/$n" "$r/etc/systemd/system/$t.requires/$n"
    done
}
for f in "${UNIT_FILES[@]}"; do enable_unit "$f"; done
for d in "${DROPIN_DIRS[@]}"; do mkdir -p "$sysd/$(basename "$d")" && cp -a "$d/." "$sysd/$(basename "$d")/"; done
if [ "$TEST_IMAGE" = 1 ]; then
    for f in "${TEST_FILES[@]}"; do
        case "$f" in
            */test-node/kubelet.service) enable_unit "$f" ;;
            *.service) enable_unit "$f" ;;
            *.network) install -D -m 0644 "$f" "$r/etc/systemd/network/$(basename "$f")" ;;
            */units/test/*.sh) install -D -m 0755 "$f" "$r/usr/local/libexec/$(basename "$f" .sh)" ;;
        esac
    done
    # The real node: Debian's containerd 1.6 and runc are replaced by the v2 builds in place, so
    # Debian's containerd.service runs them unchanged.
    for f in kubelet kubeadm; do install -m 0755 "$KUBE_BIN/$f" "$r/usr/bin/$f"; done
    for f in containerd containerd-shim-runc-v2 ctr; do install -m 0755 "$REAL_BIN/$f" "$r/usr/bin/$f"; done
    install -m 0755 "$REAL_BIN/runc" "$r/usr/sbin/runc"
    install -m 0755 "$KUBE_BIN/kubectl" "$r/usr/local/bin/kubectl"
    install -m 0755 "$REAL_BIN/etcdctl" "$r/usr/local/bin/etcdctl"
    for f in bridge host-local loopback portmap; do install -D -m 0755 "$REAL_BIN/cni/$f" "$r/opt/cni/bin/$f"; done
    install -D -m 0644 "$HERE/test-node/containerd.toml" "$r/etc/containerd/config.toml"
    install -D -m 0644 "$HERE/test-node/hosts.toml" "$r/etc/containerd/certs.d/_default/hosts.toml"
    install -D -m 0644 "$HERE/test-node/10-bridge.conflist" "$r/etc/cni/net.d/10-bridge.conflist"
    mkdir -p "$sysd/kubelet.service.d"
    install -m 0644 "$REPO/units/kubelet-dropin/10-kubeadm.conf" "$sysd/kubelet.service.d/10-kubeadm.conf"
    # What the image was built for: kubestrap compares it with the node's version at every boot
    # (an upgrade by image, docs/upgrades.md).
    kv=$("$KUBE_BIN/kubelet" --version | awk '{print $2}')
    printf '{"kubernetesVersion": "%s"}\n' "$kv" | install -D -m 0644 /dev/stdin "$r/usr/share/kubestrap/image.json"
    log "container images (image/test-images.sh)"
    "$HERE/test-images.sh" "$REAL_BIN" "$r" "$r/usr/share/kubestrap/images" "$kv" "$KUBE_BIN" >&2
    if [ "$PRELOADED" = 1 ]; then
        log "preload the images into the image's containerd store (on this host)"
        host_preload "$r"
    fi
fi
[ -d "$wants" ] || die "nothing enabled"
find "$r/usr/bin" "$r/usr/sbin" "$r/opt" "$r/usr/share/kubestrap" "$r/etc/containerd" "$r/etc/cni" "$r/usr/local" "$sysd" "$r/etc/systemd/system" -newer "$BASE/rootfs.tar" \
    -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} + 2>/dev/null || true

rm -rf "$OUT.tmp" && mkdir -p "$OUT.tmp"
E2FSPROGS_FAKE_TIME=$SOURCE_DATE_EPOCH mkfs.ext4 -q -F -L rootfs -U "$FS_UUID" \
    -E "hash_seed=$FS_UUID,root_owner=0:0" -d "$r" "$OUT.tmp/rootfs.ext4" "$IMAGE_SIZE" >/dev/null
cp "$BASE/vmlinuz" "$BASE/initrd.img" "$BASE/packages.txt" "$OUT.tmp/"
cat >"$OUT.tmp/image.env" <<EOF
IMAGE_KEY=$IMG_KEY
IMAGE_VARIANT=$VARIANT
IMAGE_ROOTFS=$OUT/rootfs.ext4
IMAGE_KERNEL=$OUT/vmlinuz
IMAGE_INITRD=$OUT/initrd.img
IMAGE_KVER=$KVER
IMAGE_BASE_KEY=$KEY
KUBESTRAP_SHA256=$BIN_SUM
EOF
rm -rf "$OUT" && mv "$OUT.tmp" "$OUT"
log "image built: $OUT/rootfs.ext4 ($(du -h --apparent-size "$OUT/rootfs.ext4" | cut -f1) sparse, $(du -h "$OUT/rootfs.ext4" | cut -f1) used)"
echo "$OUT/image.env"
