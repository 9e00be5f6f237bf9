#!/usr/bin/env bash
# Session 7's second device call (< 10 min): issue 15's default-workload targets with request arenas as runs: BF16,
# 3 rounds, against cuda-async (the PERIODIC default and the on-map reclaim), the pool capped at 0.9x cuda-async's
# peak, issue 15's short-request workload (call A's run of it ran out of time). From the repository root with the bundle carried.
set -uo pipefail
TAG=s7B
source "$(dirname "$0")/call-lib.sh"
ONMAP=gpupool.memory.budget-reclaim=ON_MAP
say "pool"; mkdir -p "$OUT/pool"
timeout 290 bash tools/compare-allocators.sh full --rounds 3 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL,TWO_LEVEL+$ONMAP" --out-dir "$OUT/pool/bf16" > "$OUT/pool/compare.log" 2>&1; say "pool rc=$?"
grep '^|' "$OUT/pool/bf16/comparison.md" | head -20
CAP=$(cuda_async_cap "$OUT/pool/bf16/comparison.json" 0.9)
say "capped at ${CAP}B"
timeout 80 bash tools/compare-allocators.sh full --rounds 1 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL+gpupool.memory.cap-bytes=${CAP}B,TWO_LEVEL+gpupool.memory.cap-bytes=${CAP}B+$ONMAP" \
  --out-dir "$OUT/pool/capped" > "$OUT/pool/capped.log" 2>&1; say "capped rc=$?"
grep '^|' "$OUT/pool/capped/comparison.md" | head -6
timeout 140 bash tools/compare-allocators.sh full --rounds 1 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL,TWO_LEVEL+$ONMAP" "${SHORT[@]}" --out-dir "$OUT/pool/short" > "$OUT/pool/short.log" 2>&1
say "pool short rc=$?"; grep '^|' "$OUT/pool/short/comparison.md" | head -5; pk pool
say done
