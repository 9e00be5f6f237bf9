#!/usr/bin/env bash
# s21-B without the GPU suite, to fit the device time left (< 6 min): the FP32 default workload, 3 rounds of 10 s;
# the BF16 default workload, 2 rounds of 8 s. From the repository root with the bundle (tools/gpu-bundle.sh) carried.
set -uo pipefail
TAG=s21C
source "$(dirname "$0")/call-lib.sh"
mkdir -p "$OUT/pool"
timeout 200 bash tools/compare-allocators.sh full --rounds 3 --warmup 3s --duration 10s --drain 3s \
  --server-args "--gpupool.serving.queue-capacity=256" --modes "CUDA_ASYNC,TWO_LEVEL" \
  --out-dir "$OUT/pool/fp32" > "$OUT/pool/fp32.log" 2>&1; say "fp32 rc=$?"; grep '^|' "$OUT/pool/fp32/comparison.md" | tail -3
grep "req/s ok" "$OUT/pool/fp32.log"
timeout 125 bash tools/compare-allocators.sh full --rounds 2 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL" --out-dir "$OUT/pool/bf16" > "$OUT/pool/bf16.log" 2>&1
say "bf16 rc=$?"; grep '^|' "$OUT/pool/bf16/comparison.md" | tail -3
grep "req/s ok" "$OUT/pool/bf16.log"
pk pool
say done
