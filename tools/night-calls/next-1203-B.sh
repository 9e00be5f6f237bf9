#!/usr/bin/env bash
# Next session's second device call (< 10 min): issue 15's live-load targets with the run reserve (local hits, memory
# with the PERIODIC and the on-map reclaim), the capped pool, and issue 16's short target with request arenas on
# both sides (batching off against on). From the repository root with the bundle carried.
set -uo pipefail
TAG=nextB
source "$(dirname "$0")/call-lib.sh"
ONMAP=gpupool.memory.budget-reclaim=ON_MAP
say "pool"; mkdir -p "$OUT/pool"
timeout 300 bash tools/compare-allocators.sh full --rounds "${ROUNDS:-3}" --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL,TWO_LEVEL+$ONMAP" --out-dir "$OUT/pool/bf16" > "$OUT/pool/compare.log" 2>&1; say "pool rc=$?"
grep '^|' "$OUT/pool/bf16/comparison.md" | head -20
CAP=$(cuda_async_cap "$OUT/pool/bf16/comparison.json" 0.9)
pk pool
say "capped at ${CAP}B"; mkdir -p "$OUT/capped"
timeout 80 bash tools/compare-allocators.sh full --rounds 1 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "TWO_LEVEL+gpupool.memory.cap-bytes=${CAP}B,TWO_LEVEL+gpupool.memory.cap-bytes=${CAP}B+$ONMAP" \
  --out-dir "$OUT/capped/bf16" > "$OUT/capped/compare.log" 2>&1; say "capped rc=$?"
grep '^|' "$OUT/capped/bf16/comparison.md" | head -6; pk capped
say "batching"; mkdir -p "$OUT/batching"
timeout 130 bash tools/batching-bench.sh "$OUT/batching" short --warmup 5s --duration 10s --drain 2s \
  > "$OUT/batching/bench.log" 2>&1; say "batching rc=$?"; cat "$OUT/batching/batching.md" 2>/dev/null; pk batching
say done
