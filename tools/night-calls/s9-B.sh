#!/usr/bin/env bash
# Session 9's second device call (< 10 min): issue 15's other targets on the new defaults (lazy fences on), 3 rounds
# each: the pool capped at 0.9x cuda-async's peak reserved bytes (BF16 default workload), the short-request workload,
# FP32 on the default workload; then the CUDA fault soak (the pool drains to 0).
set -uo pipefail
TAG=s9B
source "$(dirname "$0")/call-lib.sh"
mkdir -p "$OUT/pool"
timeout 100 bash tools/compare-allocators.sh full --rounds 1 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC" --out-dir "$OUT/pool/ref" > "$OUT/pool/ref.log" 2>&1; say "ref rc=$?"
CAP=$(cuda_async_cap "$OUT/pool/ref/comparison.json" 0.9)
timeout 170 bash tools/compare-allocators.sh full --rounds 3 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL+gpupool.memory.cap-bytes=${CAP}B" --out-dir "$OUT/pool/capped" > "$OUT/pool/capped.log" 2>&1
say "capped at ${CAP}B rc=$?"; grep '^|' "$OUT/pool/capped/comparison.md" | tail -3
timeout 120 bash tools/compare-allocators.sh full --rounds 3 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL" "${SHORT[@]}" --out-dir "$OUT/pool/short" > "$OUT/pool/short.log" 2>&1
say "short rc=$?"; grep '^|' "$OUT/pool/short/comparison.md" | tail -3
timeout 150 bash tools/compare-allocators.sh full --rounds 3 --warmup 3s --duration 8s --drain 3s \
  --server-args "--gpupool.serving.queue-capacity=256" --modes "CUDA_ASYNC,TWO_LEVEL" \
  --out-dir "$OUT/pool/fp32" > "$OUT/pool/fp32.log" 2>&1; say "pool fp32 rc=$?"; grep '^|' "$OUT/pool/fp32/comparison.md" | tail -3
pk pool
cuda_soak 80
say done
