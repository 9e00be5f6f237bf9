#!/usr/bin/env bash
# Session 7's last device call (< 4 min, what was left of the budget): 16 MiB large extents on the H200. BF16 default
# workload, 2 rounds, cuda-async against the pool's defaults (ON_MAP); then the GPU suite.
set -uo pipefail
TAG=s7E
source "$(dirname "$0")/call-lib.sh"
mkdir -p "$OUT/pool"
timeout 125 bash tools/compare-allocators.sh full --rounds 2 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL" --out-dir "$OUT/pool/bf16" > "$OUT/pool/compare.log" 2>&1; say "pool rc=$?"
grep '^|' "$OUT/pool/bf16/comparison.md" | tail -3; pk pool
say "suite"; timeout 80 bash tools/gpu-suite.sh "$OUT/suite" tests > /dev/null 2>&1; say "suite rc=$?"
tail -2 "$OUT/suite/gpu-suite.log"; pk suite
say done
