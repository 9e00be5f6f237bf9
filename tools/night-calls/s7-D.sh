#!/usr/bin/env bash
# Session 7's fourth device call (< 8 min): which budget reclaim the server should default to, with request arenas
# as runs. BF16 default workload, 3 rounds: cuda-async, ON_MAP, ON_MAP with twice the mapped slack (fewer maps, more
# memory); then FP32 one round: cuda-async, PERIODIC, ON_MAP.
set -uo pipefail
TAG=s7D
source "$(dirname "$0")/call-lib.sh"
ONMAP=gpupool.memory.budget-reclaim=ON_MAP
mkdir -p "$OUT/pool"
timeout 250 bash tools/compare-allocators.sh full --rounds 3 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL+$ONMAP,TWO_LEVEL+$ONMAP+gpupool.memory.mapped-slack=0.125" \
  --out-dir "$OUT/pool/bf16" > "$OUT/pool/compare.log" 2>&1; say "pool rc=$?"
grep '^|' "$OUT/pool/bf16/comparison.md" | tail -5
timeout 130 bash tools/compare-allocators.sh full --rounds 1 --warmup 3s --duration 8s --drain 3s \
  --server-args "--gpupool.serving.queue-capacity=256" --modes "CUDA_ASYNC,TWO_LEVEL,TWO_LEVEL+$ONMAP" \
  --out-dir "$OUT/pool/fp32" > "$OUT/pool/fp32.log" 2>&1; say "pool fp32 rc=$?"
grep '^|' "$OUT/pool/fp32/comparison.md" | head -5; pk pool
say done
