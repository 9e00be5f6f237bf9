#!/usr/bin/env bash
# Session 7's third device call (< 10 min): issue 15's short-request workload over 2 rounds (call B's one round moved
# with cuda-async's own spread) and the pool capped at 0.9x call B's cuda-async peak (452 984 832 B).
set -uo pipefail
TAG=s7C
source "$(dirname "$0")/call-lib.sh"
ONMAP=gpupool.memory.budget-reclaim=ON_MAP
mkdir -p "$OUT/pool"
timeout 290 bash tools/compare-allocators.sh full --rounds 2 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL,TWO_LEVEL+$ONMAP" "${SHORT[@]}" --out-dir "$OUT/pool/short" > "$OUT/pool/short.log" 2>&1
say "pool short rc=$?"; grep '^|' "$OUT/pool/short/comparison.md" | tail -5
CAP=${CAP:-452984832}
timeout 135 bash tools/compare-allocators.sh full --rounds 1 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL+gpupool.memory.cap-bytes=${CAP}B,TWO_LEVEL+gpupool.memory.cap-bytes=${CAP}B+$ONMAP" \
  --out-dir "$OUT/pool/capped" > "$OUT/pool/capped.log" 2>&1; say "capped rc=$?"
grep '^|' "$OUT/pool/capped/comparison.md" | head -6; pk pool
say done
