#!/usr/bin/env bash
# bench/real-kubeadm.sh: the on-disk phases, kubestrap vs the REAL kubeadm v1.37.2, side by side.
#
# The same phase set on both sides: certs, kubeconfig, etcd, control-plane, kubelet-start
# (kubestrap's --on-disk-only, preflight included but skipped by kubestrap under a --root that
# is not /; kubeadm's preflight is not run). kubeadm's kubelet-start writes its three files,
# then finds no systemd and only warns (exit 0).
#   ks      kubestrap init --on-disk-only --config F --root R     (R a fresh tmpfs)
#   kadm-1  kubeadm init --config F --skip-phases <all but those five>   (one process)
#   kadm-5  kubeadm init phase certs all && ... kubeconfig all && etcd local &&
#           control-plane all && kubelet-start   (five processes, one per phase)
# Every run, on both sides, is one whole `unshare --mount --net` process: an empty network
# namespace (nothing reachable) and fresh tmpfs mounts over /etc/kubernetes, /var/lib/kubelet
# and /var/lib/etcd (kubeadm's fixed paths) or over kubestrap's root, so both write to tmpfs
# and pay the same wrapper cost.
# Key types: each tool's default (kubestrap: ECDSA-P256; kubeadm v1beta4: RSA-2048), then
# encryptionAlgorithm: RSA-2048 for both.
# Runs are interleaved (ks, kadm-1, kadm-5, ks, ...) after one warm-up each; the table has the
# median wall, CPU (user+sys) and peak RSS (largest single process, GNU time's %M), and the
# ratio kubeadm/kubestrap of the median walls.
#
# Needs root (unshare, mount). Environment: RUNS (default 7, at least 5), KUBEADM (default
# the scripts/real-k8s cache), SKIP_BUILD=1 (use the existing release binary).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
runs=${RUNS:-7}
((runs >= 5)) || { echo "RUNS must be at least 5" >&2; exit 2; }
kubeadm=${KUBEADM:-${KUBESTRAP_CACHE:-$HOME/.cache/kubestrap}/k8s/v1.37.2/bin/kubeadm}
[[ -x $kubeadm ]] || { echo "no kubeadm at $kubeadm: run scripts/real-k8s" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "needs GNU time (/usr/bin/time)" >&2; exit 1; }

if [[ ${SKIP_BUILD:-0} != 1 ]]; then
  cargo build --release >&2
fi
# .cargo/config.toml sets build.target, so the binary is under the target triple.
bin=$repo/target/x86_64-unknown-linux-gnu/release/kubestrap
[[ -x $bin ]] || bin=$repo/target/release/kubestrap
[[ -x $bin ]] || { echo "no release binary: cargo build --release" >&2; exit 1; }

for d in /etc/kubernetes /var/lib/kubelet /var/lib/etcd; do mkdir -p "$d"; done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The fixture: fixed version, node name, TEST-NET address, an explicit CRI socket (no probing).
config() {
  cat <<EOF
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
nodeRegistration:
  name: cp-1
  criSocket: unix:///run/containerd/containerd.sock
localAPIEndpoint:
  advertiseAddress: 192.0.2.10
  bindPort: 6443
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.37.2
$1
EOF
}
config "" >"$work/default.yaml"
config "encryptionAlgorithm: RSA-2048" >"$work/rsa.yaml"

skip=preflight,wait-control-plane,upload-config,upload-certs,mark-control-plane,bootstrap-token,kubelet-finalize,addon,show-join-command
mounts='mount -t tmpfs none /etc/kubernetes && mount -t tmpfs none /var/lib/kubelet && mount -t tmpfs none /var/lib/etcd'

# cmd KIND CONFIG: the shell line one run executes inside the namespaces.
cmd() {
  local f=$2
  case $1 in
    ks) echo "mount -t tmpfs none $work/root && exec $bin init --on-disk-only --config $f --root $work/root" ;;
    kadm-1) echo "$mounts && exec $kubeadm init --config $f --skip-phases $skip" ;;
    kadm-5)
      local k="$kubeadm init phase"
      echo "$mounts && $k certs all --config $f && $k kubeconfig all --config $f && $k etcd local --config $f && $k control-plane all --config $f && $k kubelet-start --config $f"
      ;;
  esac
}

# once KIND CONFIG LABEL: one timed run; appends "wall_ms cpu_s rss_kb" to $work/LABEL.
once() {
  local line t0 t1
  line=$(cmd "$1" "$2")
  mkdir -p "$work/root"
  t0=$(date +%s%N)
  if ! /usr/bin/time -f '%U %S %M' -o "$work/time" \
    unshare --mount --net --propagation private sh -c "$line" >"$work/out" 2>&1; then
    echo "$3 failed:" >&2
    cat "$work/out" >&2
    exit 1
  fi
  t1=$(date +%s%N)
  awk -v w=$(((t1 - t0) / 1000)) '{ printf "%.1f %.3f %d\n", w / 1000, $1 + $2, $3 }' "$work/time" >>"$work/$3"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
col() { awk -v c="$2" '{ print $c }' "$work/$1" | median; }

# The files each side leaves, compared once per key type (the same set is expected), and the
# apiserver key's type, which shows each side's key algorithm.
files() {
  unshare --mount --net --propagation private sh -c \
    "( $1 ) >/dev/null 2>&1; cd $2 && find etc/kubernetes var/lib/kubelet var/lib/etcd -type f 2>/dev/null | sort &&
     openssl pkey -in etc/kubernetes/pki/apiserver.key -noout -text | sed -n 's/^Private-Key: /key: /p'"
}
check_files() {
  local a b
  mkdir -p "$work/root"
  a=$(files "$(cmd ks "$1")" "$work/root")
  b=$(files "$(cmd kadm-1 "$1")" /)
  if [[ $(grep -v '^key:' <<<"$a") != "$(grep -v '^key:' <<<"$b")" ]]; then
    echo "note: the file sets differ (< kubestrap, > kubeadm):" >&2
    diff <(echo "$a") <(echo "$b") >&2 || true
  fi
  echo "$(basename "$1"): $(grep -vc "^key:" <<<"$a") files; kubestrap apiserver.key $(grep '^key:' <<<"$a" | cut -c6-)," \
    "kubeadm $(grep '^key:' <<<"$b" | cut -c6-) ($(grep -vc '^key:' <<<"$b") files)"
}

echo "kubestrap: $bin ($(git rev-parse --short HEAD))"
echo "kubeadm:   $kubeadm ($("$kubeadm" version -o short))"
echo "runs: $runs each, interleaved, after one warm-up; $(nproc) cores; $(date -u +%FT%TZ)"
check_files "$work/default.yaml"
check_files "$work/rsa.yaml"
echo
printf '%-40s %-7s %10s %10s %9s %9s\n' "key type" tool "wall ms" "cpu s" "rss MB" "kubeadm/ks"
for case in "default:default.yaml:kubestrap ECDSA-P256 / kubeadm RSA-2048" "rsa:rsa.yaml:RSA-2048 both"; do
  IFS=: read -r tag file label <<<"$case"
  for kind in ks kadm-1 kadm-5; do once "$kind" "$work/$file" warmup; done
  for ((i = 0; i < runs; i++)); do
    for kind in ks kadm-1 kadm-5; do once "$kind" "$work/$file" "$tag-$kind"; done
  done
  ks=$(col "$tag-ks" 1)
  for kind in ks kadm-1 kadm-5; do
    wall=$(col "$tag-$kind" 1)
    ratio=$(awk -v a="$wall" -v b="$ks" 'BEGIN { printf "%.1fx", a / b }')
    [[ $kind == ks ]] && ratio=""
    printf '%-40s %-7s %10s %10s %9s %9s\n' "$label" "$kind" "$wall" "$(col "$tag-$kind" 2)" \
      "$(awk -v k="$(col "$tag-$kind" 3)" 'BEGIN { printf "%.1f", k / 1024 }')" "$ratio"
  done
done
