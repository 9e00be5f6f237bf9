#!/usr/bin/env bash
# Session 7's first device call (< 10 min): proof of request arenas as runs (DevicePool.allocateArena) on the H200.
# The GPU suite, AllocBench with its untimed warm-up pass, issue 15's short-request workload with arenas on both
# sides (the server default) and with a block per tensor on both sides, the CUDA fault soak.
# From the repository root with the bundle (tools/gpu-bundle.sh) carried; each stage in its own tarball under OUT.
set -uo pipefail
TAG=s7A
source "$(dirname "$0")/call-lib.sh"
ONMAP=gpupool.memory.budget-reclaim=ON_MAP
gpu_suite 190
say "pool short"; mkdir -p "$OUT/pool"
timeout 100 bash tools/compare-allocators.sh full --rounds 1 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL,TWO_LEVEL+$ONMAP" "${SHORT[@]}" --out-dir "$OUT/pool/short" > "$OUT/pool/short.log" 2>&1
say "pool short rc=$?"; grep '^|' "$OUT/pool/short/comparison.md" | head -5
timeout 75 bash tools/compare-allocators.sh full --rounds 1 --warmup 3s --duration 8s --drain 3s \
  --server-args "$BF16 --gpupool.serving.request-arena=false" --modes "CUDA_ASYNC,TWO_LEVEL" "${SHORT[@]}" \
  --out-dir "$OUT/pool/short-per-tensor" > "$OUT/pool/short-per-tensor.log" 2>&1
say "pool short per tensor rc=$?"; grep '^|' "$OUT/pool/short-per-tensor/comparison.md" | head -4; pk pool
say "alloc"; alloc_bench 100 90; say "alloc rc=$?"
grep -E '^(pool|pool-global-only|pool-global-only-lazy-fences|fence|host-pool) ' "$OUT/alloc/alloc.log" | head -20; grep -E '^pool +(1|16) streams' "$OUT/alloc/alloc.log"; pk alloc
cuda_soak 80
say done
