#!/usr/bin/env bash
# Session 13's second device call (< 10 min), on main as it is after session 12's serving fixes (a batched request
# refused before its batch no longer stays counted as running): 1) the GPU suite; 2) the BF16 default workload, 3 rounds;
# 3) the short-request workload (SHORT), 2 rounds, arenas on both sides.
# From the repository root with the bundle (tools/gpu-bundle.sh) and target/cuda-harness carried.
set -uo pipefail
TAG=s13B
source "$(dirname "$0")/call-lib.sh"
gpu_suite 170
mkdir -p "$OUT/pool"
timeout 190 bash tools/compare-allocators.sh full --rounds 3 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL" --out-dir "$OUT/pool/bf16" > "$OUT/pool/bf16.log" 2>&1
say "bf16 rc=$?"; grep '^|' "$OUT/pool/bf16/comparison.md" | tail -3
timeout 140 bash tools/compare-allocators.sh full --rounds 2 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL" "${SHORT[@]}" --out-dir "$OUT/pool/short" > "$OUT/pool/short.log" 2>&1
say "short rc=$?"; grep '^|' "$OUT/pool/short/comparison.md" | tail -3
pk pool
say done
