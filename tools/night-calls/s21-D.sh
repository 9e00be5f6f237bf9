#!/usr/bin/env bash
# The FP32 default workload after the reserve change, 3 rounds of 10 s (< 3.5 min): the last device time of session 21.
# From the repository root with the bundle (tools/gpu-bundle.sh) carried.
set -uo pipefail
TAG=s21D
source "$(dirname "$0")/call-lib.sh"
mkdir -p "$OUT/pool"
timeout 200 bash tools/compare-allocators.sh full --rounds 3 --warmup 3s --duration 10s --drain 3s \
  --server-args "--gpupool.serving.queue-capacity=256" --modes "CUDA_ASYNC,TWO_LEVEL" \
  --out-dir "$OUT/pool/fp32" > "$OUT/pool/fp32.log" 2>&1; say "fp32 rc=$?"; grep '^|' "$OUT/pool/fp32/comparison.md" | tail -3
grep "req/s ok" "$OUT/pool/fp32.log"
pk pool
say done
