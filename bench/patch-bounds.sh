#!/usr/bin/env bash
# bench/patch-bounds.sh: hostile and oversized patch files, kubestrap vs the REAL kubeadm v1.37.2,
# side by side: `init phase etcd` with a patches directory holding one file, each run timed
# whole by GNU time (wall seconds, peak RSS), kubeadm's bounded by `ulimit -v` and `timeout` so
# that a bomb cannot take the machine (its row then says killed or out of memory).
#   nested-keys   etcd+json.json: 30 flow mappings each the key of the next (330 bytes)
#   copy-doubling etcd+json.json: 30 JSON-patch copies of /spec into itself (1.6 kB)
#   long-list     etcd.yaml: a 1 MiB strategic patch of ~21,000 containers with $setElementOrder
# Every run is in an empty network namespace (unshare --net); kubeadm's with a tmpfs over
# /etc/kubernetes (its fixed path), kubestrap's under a scratch --root.
# Needs root. Environment: KUBEADM (default the scripts/real-k8s cache), MEM_KIB (kubeadm's
# address-space bound, default 4 GiB), SECS (kubeadm's time bound, default 60), SKIP_BUILD=1.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
kubeadm=${KUBEADM:-${KUBESTRAP_CACHE:-$HOME/.cache/kubestrap}/k8s/v1.37.2/bin/kubeadm}
[[ -x $kubeadm ]] || { echo "no kubeadm at $kubeadm: run scripts/real-k8s" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "needs GNU time (/usr/bin/time)" >&2; exit 1; }
[[ ${SKIP_BUILD:-0} == 1 ]] || cargo build --release -p kubestrap >&2
bin=$repo/target/x86_64-unknown-linux-gnu/release/kubestrap
mem=${MEM_KIB:-4194304} secs=${SECS:-60}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 - "$work" <<'EOF'
import json, os, sys
w = sys.argv[1]
def put(case, name, text):
    os.makedirs(f"{w}/{case}", exist_ok=True)
    open(f"{w}/{case}/{name}", "w").write(text)
key = "a"
for _ in range(30):
    key = "{" + key + ": x}"
put("nested-keys", "etcd+json.json", "[" + key + "]\n")
put("copy-doubling", "etcd+json.json",
    json.dumps([{"op": "copy", "from": "/spec", "path": f"/spec/x{i}"} for i in range(30)]) + "\n")
n = 21000
order = ", ".join(f"{{name: c{i}}}" for i in range(n))
items = ", ".join(f"{{name: c{i}, image: x}}" for i in range(n))
put("long-list", "etcd.yaml", f"spec:\n  $setElementOrder/containers: [{order}]\n  containers: [{items}]\n")
EOF

config() {   # config DIR: the sample control-plane config with patches.directory DIR
  sed "s|^kind: InitConfiguration\$|kind: InitConfiguration\npatches:\n  directory: $1|" examples/control-plane.yaml
}

printf '%-14s %-10s %5s %9s %11s  %s\n' input tool exit wall_s peak_MiB note
for case in nested-keys copy-doubling long-list; do
  size=$(stat -c %s "$work/$case"/*)
  # kubestrap: its own root (a scratch directory); the patches directory inside it.
  root=$work/root-$case
  mkdir -p "$root/p"
  cp "$work/$case"/* "$root/p/"
  config /p >"$work/ks-$case.yaml"
  set +e
  /usr/bin/time -f '%e %M' -o "$work/t" unshare --net \
    "$bin" init phase --config "$work/ks-$case.yaml" --root "$root" etcd >"$work/ks-$case.out" 2>&1
  rc=$?
  set -e
  read -r wall rss < <(tail -n1 "$work/t") || { wall=?; rss=0; }
  printf '%-14s %-10s %5s %9s %11s  %s\n' "$case" kubestrap "$rc" "$wall" "$((rss / 1024))" \
    "$(grep -o 'patch[^;]*' "$work/ks-$case.out" | tail -n1 | cut -c1-90 || true) (${size} bytes)"
  # kubeadm: /etc/kubernetes on a tmpfs, its address space and time bounded.
  config "$work/$case" >"$work/ka-$case.yaml"
  set +e
  /usr/bin/time -f '%e %M' -o "$work/t" unshare --mount --net sh -c \
    "mount -t tmpfs none /etc/kubernetes && ulimit -v $mem && exec timeout -s KILL $secs '$kubeadm' init phase etcd local --config '$work/ka-$case.yaml'" \
    >"$work/ka-$case.out" 2>&1
  rc=$?
  set -e
  read -r wall rss < <(tail -n1 "$work/t" 2>/dev/null) || { wall=?; rss=0; }
  note=$(grep -E 'error|invalid|out of memory|cannot allocate' "$work/ka-$case.out" | grep -v 'stack trace' | head -n1 | cut -c1-90 || true)
  [[ $rc == 137 ]] && note="killed at ${secs} s"
  printf '%-14s %-10s %5s %9s %11s  %s\n' "$case" kubeadm "$rc" "$wall" "$((rss / 1024))" "$note"
done
