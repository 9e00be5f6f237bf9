#!/usr/bin/env bash
# Session 11's last device call (< 10 min), on the server's new defaults (8 MiB mapped extents, reclaim-order
# SMALL_CHUNKS_FIRST): 1) the BF16 default workload, 3 rounds, against cuda-async, beside the previous reclaim order;
# 2) capped at 0.9x cuda-async's median peak, 2 rounds; 3) the CUDA fault soak.
# From the repository root with the bundle (tools/gpu-bundle.sh) and target/cuda-harness carried.
set -uo pipefail
TAG=s11C
source "$(dirname "$0")/call-lib.sh"
mkdir -p "$OUT/pool"
timeout 250 bash tools/compare-allocators.sh full --rounds 3 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL,TWO_LEVEL+gpupool.memory.reclaim-order=HIGHEST_ADDRESS" \
  --out-dir "$OUT/pool/bf16" > "$OUT/pool/bf16.log" 2>&1; say "bf16 rc=$?"; grep '^|' "$OUT/pool/bf16/comparison.md" | tail -5
CAP=$(cuda_async_cap "$OUT/pool/bf16/comparison.json" 0.9); say "cap $CAP"
timeout 130 bash tools/compare-allocators.sh full --rounds 2 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL+gpupool.memory.cap-bytes=${CAP}B" --out-dir "$OUT/pool/capped" > "$OUT/pool/capped.log" 2>&1
say "capped rc=$?"; grep '^|' "$OUT/pool/capped/comparison.md" | tail -3
pk pool
cuda_soak 75
say done
