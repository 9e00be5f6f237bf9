#!/usr/bin/env bash
# The next session's first device call (< 10 min): proof on the H200 of what session 7 left unproven there. The GPU
# suite (16 MiB large extents; Precision, GemmEngine, AttentionKernels and KernelOptions out of CudaTensorOps), the
# gemm and ops checks, AllocBench, then issue 15's short-request workload over 3 rounds (one round moves by a third).
# From the repository root with the bundle (tools/gpu-bundle.sh) and target/cuda-harness carried.
set -uo pipefail
TAG=s8A
source "$(dirname "$0")/call-lib.sh"
SHORT=(--concurrency 32 --batch-min 1 --batch-max 4 --seq-min 1 --seq-median 24 --seq-sigma 0.6 --seq-max 128)
say "suite"; timeout 120 bash tools/gpu-suite.sh "$OUT/suite" tests > /dev/null 2>&1; say "suite rc=$?"
tail -3 "$OUT/suite/gpu-suite.log"; grep -o 'testcase name="[^"]*" classname="[^"]*"[^>]*>\s*<failure' "$OUT/suite/gpu-tests.xml" | head; pk suite
say "checks"; mkdir -p "$OUT/checks"
timeout 60 bash tools/gemm-gpu-check.sh "$OUT/checks/gemm" tests > "$OUT/checks/gemm.log" 2>&1; say "gemm-check rc=$?"
timeout 90 bash tools/ops-gpu-check.sh "$OUT/checks/ops" tests > "$OUT/checks/ops.log" 2>&1; say "ops-check rc=$?"
tail -2 "$OUT/checks/gemm.log" "$OUT/checks/ops.log"; pk checks
say "alloc"; alloc_bench 100 90; say "alloc rc=$?"
grep -E '^(pool|pool-global-only-lazy-fences|fence|host-pool) ' "$OUT/alloc/alloc.log" | head -14; pk alloc
say "pool short"; mkdir -p "$OUT/pool"
timeout 200 bash tools/compare-allocators.sh full --rounds 3 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL" "${SHORT[@]}" --out-dir "$OUT/pool/short" > "$OUT/pool/short.log" 2>&1
say "pool short rc=$?"; grep '^|' "$OUT/pool/short/comparison.md" | tail -3; pk pool
say done
