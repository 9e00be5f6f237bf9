#!/usr/bin/env bash
# Issue 15's FP32 default workload on the code s20-A/B measured, 3 rounds of 12 s (s20-B's 8 s rounds did not fit
# its stage's limit) (< 5 min). From the repository root with the bundle (tools/gpu-bundle.sh) carried.
set -uo pipefail
TAG=s21A
source "$(dirname "$0")/call-lib.sh"
mkdir -p "$OUT/pool"
timeout 280 bash tools/compare-allocators.sh full --rounds 3 --warmup 3s --duration 12s --drain 3s \
  --server-args "--gpupool.serving.queue-capacity=256" --modes "CUDA_ASYNC,TWO_LEVEL" \
  --out-dir "$OUT/pool/fp32" > "$OUT/pool/fp32.log" 2>&1; say "fp32 rc=$?"; grep '^|' "$OUT/pool/fp32/comparison.md" | tail -3
grep "req/s ok" "$OUT/pool/fp32.log"
pk pool
say done
