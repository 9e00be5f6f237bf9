#!/usr/bin/env bash
# The last device call of 2026-12-02 (< 10 min): the defaults the day's measurements point at, measured against
# cuda-async in one call. The pool on the BF16 default workload (2 rounds) with the on-map reclaim and lazy fences
# (POOL_MODES), one FP32 round, batching short with padded batches replaying graphs on a row ladder up to 128,
# batching long (1 round), issue 15's short-request workload, AllocBench with ALLOC=1, the CUDA fault soak with the chosen memory settings (SOAK_SETTINGS).
# From the repository root with the bundle carried; each stage in its own tarball under OUT.
set -uo pipefail
TAG=last
source "$(dirname "$0")/call-lib.sh"
ONMAP=gpupool.memory.budget-reclaim=ON_MAP
LAZY=gpupool.memory.lazy-fences=true
POOL_MODES=${POOL_MODES:-CUDA_ASYNC,TWO_LEVEL+$ONMAP,TWO_LEVEL+$ONMAP+$LAZY}
SOAK_SETTINGS=${SOAK_SETTINGS:-$ONMAP+$LAZY}
say "pool"; mkdir -p "$OUT/pool"
timeout 175 bash tools/compare-allocators.sh full --rounds 2 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "$POOL_MODES" --out-dir "$OUT/pool/bf16" > "$OUT/pool/compare.log" 2>&1; say "pool rc=$?"
grep '^|' "$OUT/pool/bf16/comparison.md" | tail -6
timeout 75 bash tools/compare-allocators.sh full --rounds 1 --warmup 3s --duration 8s --drain 3s \
  --server-args "--gpupool.serving.queue-capacity=256" --modes "CUDA_ASYNC,TWO_LEVEL+$SOAK_SETTINGS" \
  --out-dir "$OUT/pool/fp32" > "$OUT/pool/compare-fp32.log" 2>&1; say "pool fp32 rc=$?"
grep '^|' "$OUT/pool/fp32/comparison.md" | head -4
# issue 15's short-request workload: batch 1-4, sequences <= 128, 32 clients, BF16, batching off (the server default)
timeout 75 bash tools/compare-allocators.sh full --rounds 1 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL+$SOAK_SETTINGS" --concurrency 32 --batch-min 1 --batch-max 4 \
  --seq-min 1 --seq-median 24 --seq-sigma 0.6 --seq-max 128 --out-dir "$OUT/pool/short" > "$OUT/pool/compare-short.log" 2>&1
say "pool short rc=$?"; grep '^|' "$OUT/pool/short/comparison.md" | head -4; pk pool
ROWS=$(indexed gpupool.kernels.graphs.batch-buckets 1 2 4 8 16 32 64 128)
say "batching"; mkdir -p "$OUT/batching"
SHORT_VARIANTS="gpupool.kernels.graphs.enabled=true+gpupool.kernels.graphs.max-bytes=8GB$ROWS" timeout 110 \
  bash tools/batching-bench.sh "$OUT/batching" short --warmup 5s --duration 10s --drain 2s > "$OUT/batching/short.log" 2>&1
say "short rc=$?"; mv "$OUT/batching/batching.md" "$OUT/batching/short.md"; mv "$OUT/batching/batching.json" "$OUT/batching/short.json"
cat "$OUT/batching/short.md"; python3 -c "import json,sys; print(json.dumps(json.load(open(sys.argv[1])).get('short',{}).get('variants'))[:600])" "$OUT/batching/short.json"
timeout 80 bash tools/batching-bench.sh "$OUT/batching" long --warmup 5s --duration 10s --drain 2s --rounds 1 > "$OUT/batching/long.log" 2>&1
say "long rc=$?"; cat "$OUT/batching/batching.md"; pk batching
if [ "${ALLOC:-0}" = 1 ]; then
  say "alloc"; alloc_bench 100 80; say "alloc rc=$?"
  grep -E '^(pool|pool-global-only-lazy-fences) ' "$OUT/alloc/alloc.log" | head -10; pk alloc
fi
say "soak"; mkdir -p "$OUT/soak"
timeout 80 bash tools/soak.sh --backend cuda --duration 30s --concurrency 16 --modes "TWO_LEVEL+gpupool.kernels.precision=BF16+$SOAK_SETTINGS" \
  --out-dir "$OUT/soak/run" > "$OUT/soak/soak.log" 2>&1; say "soak rc=$?"; tail -4 "$OUT/soak/soak.log"; pk soak
say done
