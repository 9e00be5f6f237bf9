#!/usr/bin/env bash
# Next session's first device call (< 10 min): proof on the H200 of what 2026-12-02's afternoon built on the host
# without a GPU. The GPU suite (the CudaTensorOps split, the shared GPU fixtures, the admission ticket fix, packed
# and padded batches replaying graphs, the stream's run reserve), the two checks that now source
# tools/gpu-check-lib.sh, AllocBench (the local pair with the run reserve), the CUDA fault soak with arenas.
# From the repository root with the bundle (tools/gpu-bundle.sh) carried; each stage in its own tarball under OUT.
set -uo pipefail
TAG=nextA
source "$(dirname "$0")/call-lib.sh"
say "suite"; timeout 190 bash tools/gpu-suite.sh "$OUT/suite" tests > /dev/null 2>&1; say "suite rc=$?"
tail -3 "$OUT/suite/gpu-suite.log"; grep -o 'testcase name="[^"]*" classname="[^"]*"[^>]*>\s*<failure' "$OUT/suite/gpu-tests.xml" | head; pk suite
say "checks"; mkdir -p "$OUT/checks"
timeout 60 bash tools/gemm-gpu-check.sh "$OUT/checks/gemm" tests > "$OUT/checks/gemm.log" 2>&1; say "gemm-check rc=$?"
timeout 90 bash tools/ops-gpu-check.sh "$OUT/checks/ops" tests > "$OUT/checks/ops.log" 2>&1; say "ops-check rc=$?"
tail -2 "$OUT/checks/gemm.log" "$OUT/checks/ops.log"; pk checks
say "alloc"; alloc_bench 100 90; say "alloc rc=$?"
grep -E '^(pool|pool-global-only|pool-global-only-lazy-fences|fence) ' "$OUT/alloc/alloc.log" | head -16; grep -E '^pool +(1|16) streams' "$OUT/alloc/alloc.log"; pk alloc
say "soak"; mkdir -p "$OUT/soak"
timeout 90 bash tools/soak.sh --backend cuda --duration 30s --concurrency 16 --modes "TWO_LEVEL+gpupool.kernels.precision=BF16" \
  --out-dir "$OUT/soak/run" > "$OUT/soak/soak.log" 2>&1; say "soak rc=$?"; tail -5 "$OUT/soak/soak.log"; pk soak
say done
