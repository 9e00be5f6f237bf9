#!/usr/bin/env bash
# Session 9's third device call (< 5 min): where issue 15's BF16 p99 goes. Call A showed 490-980 maps and about as
# many unmaps per run on serving threads, ~0.8 ms of host time each (ON_MAP: an allocation that would map beyond the
# budget unmaps first). Beside cuda-async over 3 rounds: the budget reclaimed by maintenance instead (PERIODIC), once
# a second and every 100 ms, and 128 MB of unmapped physical memory kept to map again (retained handles).
set -uo pipefail
TAG=s9C
source "$(dirname "$0")/call-lib.sh"
mkdir -p "$OUT/pool"
timeout 330 bash tools/compare-allocators.sh full --rounds 3 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL+gpupool.memory.budget-reclaim=PERIODIC,TWO_LEVEL+gpupool.memory.budget-reclaim=PERIODIC+gpupool.memory.maintenance-interval=100ms,TWO_LEVEL+gpupool.memory.retained-handle-bytes=128MB" \
  --out-dir "$OUT/pool/p99" > "$OUT/pool/p99.log" 2>&1; say "pool rc=$?"; grep '^|' "$OUT/pool/p99/comparison.md" | tail -5
pk pool
say done
