#!/usr/bin/env bash
# Next session's first device call (< 10 min): proof on the H200 of what 2026-12-02's afternoon built on the host
# without a GPU. The GPU suite (the CudaTensorOps split, the shared GPU fixtures, the admission ticket fix, packed
# and padded batches replaying graphs, the stream's run reserve), the two checks that now source
# tools/gpu-check-lib.sh, AllocBench (the local pair with the run reserve), the CUDA fault soak with arenas.
# From the repository root with the bundle (tools/gpu-bundle.sh) carried; each stage in its own tarball under OUT.
set -uo pipefail
TAG=nextA
source "$(dirname "$0")/call-lib.sh"
gpu_suite 190
gpu_checks
say "alloc"; alloc_bench 100 90; say "alloc rc=$?"
grep -E '^(pool|pool-global-only|pool-global-only-lazy-fences|fence) ' "$OUT/alloc/alloc.log" | head -16; grep -E '^pool +(1|16) streams' "$OUT/alloc/alloc.log"; pk alloc
cuda_soak 90
say done
