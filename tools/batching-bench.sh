#!/usr/bin/env bash
# Dynamic batching on against off, on the GPU machine (issue 16's targets): the same server build twice per
# workload, gpupool.batching.enabled=false and =true (the generated BERT-base has no dynamic_batching field of
# its own, so the server default decides), CUDA, BF16, one AllocatorComparison run per workload
# (tools/compare-allocators.sh full: it unpacks the bundle when no JDK is here and generates the BERT-base).
#
#   tools/batching-bench.sh OUT [short|long|both] [more compare-allocators / LoadDriver options]
#     short: 64 clients, batch 1-4, sequences 1-64 (log-normal, median 24)   -> OUT/short/comparison.{json,md}
#     long:   8 clients, batch 32 x 512                                      -> OUT/long/comparison.{json,md}
#
# Each workload: two server starts (~1 min each with the BERT-base warm-up) + 5 s warm-up + 20 s measured.
# The table's req/s and p99 columns compare the two variants; comparison.json holds every number.
set -euo pipefail
OUT=${1:?usage: $0 OUT [short|long|both] [options]}
WHICH=${2:-both}
shift $(( $# >= 2 ? 2 : 1 ))
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
MODES=TWO_LEVEL+gpupool.batching.enabled=false,TWO_LEVEL+gpupool.batching.enabled=true
SERVER="--gpupool.serving.queue-capacity=256 --gpupool.kernels.precision=BF16"
COMMON=(--modes "$MODES" --server-args "$SERVER" --warmup 5s --duration 20s --drain 15s)

if [ "$WHICH" = short ] || [ "$WHICH" = both ]; then
  "$HERE/compare-allocators.sh" full "${COMMON[@]}" --concurrency 64 --batch-min 1 --batch-max 4 \
    --seq-min 1 --seq-median 24 --seq-sigma 0.6 --seq-max 64 --out-dir "$OUT/short" "$@"
fi
if [ "$WHICH" = long ] || [ "$WHICH" = both ]; then
  "$HERE/compare-allocators.sh" full "${COMMON[@]}" --concurrency 8 --batch-min 32 --batch-max 32 \
    --seq-min 512 --seq-median 512 --seq-max 512 --out-dir "$OUT/long" "$@"
fi
