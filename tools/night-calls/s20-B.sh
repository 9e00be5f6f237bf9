#!/usr/bin/env bash
# Issue 15's other targets on the same code as s20-A (< 10 min): 1) the FP32 default workload, 3 rounds; 2) the
# short-request workload (SHORT), 2 rounds; 3) AllocBench (global pair, stream-local pair, 16 streams); 4) the CUDA
# fault soak. From the repository root with the bundle (tools/gpu-bundle.sh) and target/cuda-harness carried.
set -uo pipefail
TAG=s20B
source "$(dirname "$0")/call-lib.sh"
mkdir -p "$OUT/pool"
timeout 150 bash tools/compare-allocators.sh full --rounds 3 --warmup 3s --duration 8s --drain 3s \
  --server-args "--gpupool.serving.queue-capacity=256" --modes "CUDA_ASYNC,TWO_LEVEL" \
  --out-dir "$OUT/pool/fp32" > "$OUT/pool/fp32.log" 2>&1; say "fp32 rc=$?"; grep '^|' "$OUT/pool/fp32/comparison.md" | tail -3
timeout 130 bash tools/compare-allocators.sh full --rounds 2 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL" "${SHORT[@]}" --out-dir "$OUT/pool/short" > "$OUT/pool/short.log" 2>&1
say "short rc=$?"; grep '^|' "$OUT/pool/short/comparison.md" | tail -3
pk pool
say "alloc"; alloc_bench 100 110; say "alloc rc=$?"
grep -E '^(pool|pool-global-only-lazy-fences|cuda-async) ' "$OUT/alloc/alloc.log" | head -24; pk alloc
cuda_soak 75
say done
