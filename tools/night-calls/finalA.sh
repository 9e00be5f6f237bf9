#!/usr/bin/env bash
# One-off device calls of the 2026-12-01 night session, kept because docs/benchmarks.md quotes them; run from the
# repository root on the GPU machine with the bundle (tools/gpu-bundle.sh) and tools/cuda-harness/build.sh carried.
# Final call A (2026-12-01 night): every GPU test, the pool against cuda-async (2 rounds), short batching.
set -uo pipefail
export BUNDLE=$PWD/dist/gpupool-gpu-bundle.tar.xz
S=$SECONDS
say() { echo "[finalA +$((SECONDS-S))s] $*"; }
pk() { rm -f "$OUT"/$1/*.html "$OUT"/$1/*/*.html; tar -C "$OUT" -czf "$OUT/$1.tgz" "$1" && rm -rf "$OUT/$1"; }
BF16="--gpupool.kernels.precision=BF16 --gpupool.serving.queue-capacity=256"
mkdir -p "$OUT/suite"; say tests
timeout 230 bash tools/gpu-suite.sh "$OUT/suite" tests > "$OUT/suite/suite.log" 2>&1; say "tests rc=$?"
grep -E "tests (successful|failed|aborted)|FAILED|✘" "$OUT/suite/suite.log" | head -20
pk suite
mkdir -p "$OUT/pool"; say pool
timeout 230 bash tools/compare-allocators.sh full \
  --modes "CUDA_ASYNC,TWO_LEVEL,TWO_LEVEL+gpupool.memory.budget-reclaim=PERIODIC+gpupool.memory.wait-beyond-budget=true" \
  --rounds 2 --warmup 3s --duration 10s --drain 5s --server-args "$BF16" \
  --out-dir "$OUT/pool/bf16" > "$OUT/pool/compare.log" 2>&1; say "pool rc=$?"
grep '^|' "$OUT/pool/bf16/comparison.md" | head -24
pk pool
mkdir -p "$OUT/batching"; say batching
timeout 120 bash tools/batching-bench.sh "$OUT/batching" short --warmup 3s --duration 10s --drain 4s > "$OUT/batching/bench.log" 2>&1; say "batching rc=$?"
cat "$OUT/batching/batching.md" 2>/dev/null
pk batching
say done
