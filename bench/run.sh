#!/usr/bin/env bash
# bench/run.sh: benchmark of `kubestrap init` (a benchmark, not a test; it never fails on a missed
# target, it prints PASS/FAIL next to each figure). It measures:
#   (a) whole-process wall time of `kubestrap init --config CFG --root FRESH_DIR` (all 4 phases),
#       ECDSA-P256 and RSA-2048: median/min/max over N runs, each into a fresh root;
#   (b) the same for bench/openssl-pki.sh (the same PKI made with the openssl CLI), and the ratio;
#   (c) peak RSS (ru_maxrss) of a kubestrap init run per algorithm;
#   (d) size of the stripped release binary and `file` output (is it static?).
# Targets: ECDSA <= 50 ms, RSA-2048 <= 2 s, RSS <= 20 MB, binary <= 6 MiB.
#
# Run roots are made under $TMPDIR (default /tmp) and, if it is a different tmpfs, also /dev/shm:
# kubestrap makes its writes durable (syncfs per phase), so on a disk-backed /tmp its wall time
# includes flush latency (which grows when other processes write to the same disk); the tmpfs
# figures show the compute cost. bench/openssl-pki.sh does not sync at all.
#
# Environment: RUNS_EC (default 21), RUNS_RSA (default 7), BENCH_ROOTS (colon-separated dirs to
# put run roots in; overrides the default above), SKIP_BUILD=1 (use the existing binary).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

bin=$repo/target/x86_64-unknown-linux-gnu/release/kubestrap
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
  echo "building: cargo build --release -p kubestrap" >&2
  cargo build --release -p kubestrap >&2
fi
[[ -x $bin ]] || { echo "no binary at $bin" >&2; exit 1; }

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
  --roots "$BENCH_ROOTS" \
  --runs-ec "${RUNS_EC:-21}" \
  --runs-rsa "${RUNS_RSA:-7}" \
  --work "$work"
