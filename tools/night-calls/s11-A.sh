#!/usr/bin/env bash
# Session 11's first device call (< 10 min): the GPU suite with 8 MiB mapped extents under runs below 64 MiB (the new
# default, gpupool.memory.mapped-extent-bytes), then issue 15's BF16 default workload over 3 rounds against cuda-async,
# with the 2 MiB extents of before beside them (the driver charges a map and an unmap per physical allocation).
# From the repository root with the bundle (tools/gpu-bundle.sh) and target/cuda-harness carried.
set -uo pipefail
TAG=s11A
source "$(dirname "$0")/call-lib.sh"
gpu_suite 170
mkdir -p "$OUT/pool"
timeout 330 bash tools/compare-allocators.sh full --rounds 3 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL,TWO_LEVEL+gpupool.memory.mapped-extent-bytes=2MB" --out-dir "$OUT/pool/bf16" \
  > "$OUT/pool/compare.log" 2>&1; say "pool rc=$?"; grep '^|' "$OUT/pool/bf16/comparison.md" | tail -4
pk pool
say done
