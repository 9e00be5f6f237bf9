#!/usr/bin/env bash
# Session 9's first device call (< 10 min): the GPU suite on lazy fences as the default (shared per stream between
# two synchronisations, recorded by maintenance on idle streams) and on the settled arena releases; AllocBench (the
# global pair with the shared fence and the lock-free own-freed hints); issue 15's BF16 default workload over 3 rounds
# against cuda-async, and with twice the mapped slack beside them (lazy fences left memory to spend on fewer maps).
# From the repository root with the bundle (tools/gpu-bundle.sh) and target/cuda-harness carried.
set -uo pipefail
TAG=s9A
source "$(dirname "$0")/call-lib.sh"
gpu_suite 170
say "alloc"; alloc_bench 100 95; say "alloc rc=$?"
grep -E '^(pool|pool-global-only|pool-global-only-lazy-fences|fence|host-pool|host-pool-global-only) ' "$OUT/alloc/alloc.log" | head -30; pk alloc
mkdir -p "$OUT/pool"
timeout 270 bash tools/compare-allocators.sh full --rounds 3 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL,TWO_LEVEL+gpupool.memory.mapped-slack=0.125" --out-dir "$OUT/pool/bf16" \
  > "$OUT/pool/compare.log" 2>&1; say "pool rc=$?"; grep '^|' "$OUT/pool/bf16/comparison.md" | tail -4
pk pool
say done
