#!/usr/bin/env bash
# Session 8's second device call (< 10 min): issue 15's default-workload targets with the server's defaults (request
# arenas as runs, ON_MAP, 16 MiB large extents, arenas released settled: a stream's cache flushed while the stream
# runs its next request records no fence): BF16 over 3 rounds against cuda-async, with lazy fences and with 64 MB of
# unmapped physical memory kept to map again (retained handles) beside them; the capped pool; FP32 one round.
set -uo pipefail
TAG=s8B
source "$(dirname "$0")/call-lib.sh"
mkdir -p "$OUT/pool"
timeout 360 bash tools/compare-allocators.sh full --rounds 3 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL,TWO_LEVEL+gpupool.memory.lazy-fences=true,TWO_LEVEL+gpupool.memory.retained-handle-bytes=64MB" \
  --out-dir "$OUT/pool/bf16" \
  > "$OUT/pool/compare.log" 2>&1; say "pool rc=$?"; grep '^|' "$OUT/pool/bf16/comparison.md" | tail -4
CAP=$(cuda_async_cap "$OUT/pool/bf16/comparison.json" 0.9)
timeout 110 bash tools/compare-allocators.sh full --rounds 1 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL+gpupool.memory.cap-bytes=${CAP}B" --out-dir "$OUT/pool/capped" > "$OUT/pool/capped.log" 2>&1
say "capped at ${CAP}B rc=$?"; grep '^|' "$OUT/pool/capped/comparison.md" | head -4
timeout 90 bash tools/compare-allocators.sh full --rounds 1 --warmup 3s --duration 8s --drain 3s \
  --server-args "--gpupool.serving.queue-capacity=256" --modes "CUDA_ASYNC,TWO_LEVEL" \
  --out-dir "$OUT/pool/fp32" > "$OUT/pool/fp32.log" 2>&1; say "pool fp32 rc=$?"; grep '^|' "$OUT/pool/fp32/comparison.md" | head -4
pk pool
say done
