#!/usr/bin/env bash
# Issue 15 on the pool as session 19 left it plus session 20's fence-slot and peak fixes (< 10 min): 1) the GPU suite;
# 2) the BF16 default workload, 3 rounds; 3) capped at 0.9 x cuda-async's median peak reserved, 2 rounds.
# From the repository root with the bundle (tools/gpu-bundle.sh) and target/cuda-harness carried.
set -uo pipefail
TAG=s20A
source "$(dirname "$0")/call-lib.sh"
gpu_suite 170
mkdir -p "$OUT/pool"
timeout 200 bash tools/compare-allocators.sh full --rounds 3 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL" --out-dir "$OUT/pool/bf16" > "$OUT/pool/bf16.log" 2>&1
say "bf16 rc=$?"; grep '^|' "$OUT/pool/bf16/comparison.md" | tail -3
CAP=$(cuda_async_cap "$OUT/pool/bf16/comparison.json" 0.9); say "cap $CAP"
timeout 130 bash tools/compare-allocators.sh full --rounds 2 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL+gpupool.memory.cap-bytes=${CAP}B" --out-dir "$OUT/pool/capped" > "$OUT/pool/capped.log" 2>&1
say "capped rc=$?"; grep '^|' "$OUT/pool/capped/comparison.md" | tail -3
pk pool
say done
