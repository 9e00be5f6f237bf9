#!/usr/bin/env bash
# Issue 15 after the reserve change (a large run leaves the stream's reserve in place) (< 8 min): 1) the GPU suite;
# 2) the FP32 default workload, 3 rounds of 10 s; 3) the BF16 default workload, 3 rounds of 8 s.
# From the repository root with the bundle (tools/gpu-bundle.sh) carried.
set -uo pipefail
TAG=s21B
source "$(dirname "$0")/call-lib.sh"
gpu_suite 100
mkdir -p "$OUT/pool"
timeout 215 bash tools/compare-allocators.sh full --rounds 3 --warmup 3s --duration 10s --drain 3s \
  --server-args "--gpupool.serving.queue-capacity=256" --modes "CUDA_ASYNC,TWO_LEVEL" \
  --out-dir "$OUT/pool/fp32" > "$OUT/pool/fp32.log" 2>&1; say "fp32 rc=$?"; grep '^|' "$OUT/pool/fp32/comparison.md" | tail -3
grep "req/s ok" "$OUT/pool/fp32.log"
timeout 185 bash tools/compare-allocators.sh full --rounds 3 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL" --out-dir "$OUT/pool/bf16" > "$OUT/pool/bf16.log" 2>&1
say "bf16 rc=$?"; grep '^|' "$OUT/pool/bf16/comparison.md" | tail -3
grep "req/s ok" "$OUT/pool/bf16.log"
pk pool
say done
