#!/usr/bin/env bash
# The first call of the next session with device time (< 10 min), on main's defaults: 1) the CUDA fault soak with
# tools/soak.sh's operator trims (never run on the H200); 2) AllocBench with its pool-repeat row (is the pool row's
# excess over pool-expandable the order's or the configuration's?); 3) the FP32 default workload, 3 rounds (issue 15's
# FP32 target had 2). From the repository root with the bundle (tools/gpu-bundle.sh) and target/cuda-harness carried.
set -uo pipefail
TAG=s13A
source "$(dirname "$0")/call-lib.sh"
cuda_soak 75
say "alloc"; alloc_bench 150 110; say "alloc rc=$?"
grep -E '^(pool|pool-repeat|pool-expandable|host-pool|pool-global-only-lazy-fences) ' "$OUT/alloc/alloc.log" | head -24; pk alloc
mkdir -p "$OUT/pool"
timeout 300 bash tools/compare-allocators.sh full --rounds 3 --warmup 3s --duration 8s --drain 3s \
  --server-args "--gpupool.serving.queue-capacity=256" --modes "CUDA_ASYNC,TWO_LEVEL" \
  --out-dir "$OUT/pool/fp32" > "$OUT/pool/fp32.log" 2>&1; say "fp32 rc=$?"; grep '^|' "$OUT/pool/fp32/comparison.md" | tail -4
pk pool
say done
