#!/usr/bin/env bash
# Session 8's first device call (< 10 min): proof on the H200 of what session 7 left unproven there. The GPU
# suite (16 MiB large extents; Precision, GemmEngine, AttentionKernels and KernelOptions out of CudaTensorOps), the
# gemm and ops checks, AllocBench, then issue 15's short-request workload over 3 rounds (one round moves by a third).
# From the repository root with the bundle (tools/gpu-bundle.sh) and target/cuda-harness carried.
set -uo pipefail
TAG=s8A
source "$(dirname "$0")/call-lib.sh"
gpu_suite 120
gpu_checks
say "alloc"; alloc_bench 100 90; say "alloc rc=$?"
grep -E '^(pool|pool-global-only-lazy-fences|fence|host-pool) ' "$OUT/alloc/alloc.log" | head -14; pk alloc
say "pool short"; mkdir -p "$OUT/pool"
timeout 200 bash tools/compare-allocators.sh full --rounds 3 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL" "${SHORT[@]}" --out-dir "$OUT/pool/short" > "$OUT/pool/short.log" 2>&1
say "pool short rc=$?"; grep '^|' "$OUT/pool/short/comparison.md" | tail -3; pk pool
say done
