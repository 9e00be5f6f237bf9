#!/usr/bin/env bash
# One-off device calls of the 2026-12-01 night session, kept because docs/benchmarks.md quotes them; run from the
# repository root on the GPU machine with the bundle (tools/gpu-bundle.sh) and tools/cuda-harness/build.sh carried.
# Mid-session validation call (2026-12-01 night): helpers' kernels and the pool's reclaim variants.
set -uo pipefail
export BUNDLE=$PWD/dist/gpupool-gpu-bundle.tar.xz
S=$SECONDS
say() { echo "[mid +$((SECONDS-S))s] $*"; }
pk() { tar -C "$OUT" -czf "$OUT/$1.tgz" "$1" && rm -rf "$OUT/$1"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$OUT/smi.txt" 2>&1
mkdir -p "$OUT/attn"; say attn
timeout 80 target/cuda-harness/harness src/main/resources/ptx "$OUT/attn/harness.json" --attention > "$OUT/attn/harness.log" 2>&1; say "attn rc=$?"
grep -c ' ok$' "$OUT/attn/harness.log"; grep FAIL "$OUT/attn/harness.log" | head -5; grep '^attention ' "$OUT/attn/harness.log" | head -60
pk attn
mkdir -p "$OUT/ops"; say ops
FFM_TESTS_S=1 timeout 120 tools/ops-gpu-check.sh "$OUT/ops" harness tests > "$OUT/ops/check.log" 2>&1; say "ops rc=$?"
head -60 "$OUT/ops/summary.txt" 2>/dev/null
pk ops
mkdir -p "$OUT/launch"; say launch
timeout 80 tools/launch-gpu-check.sh "$OUT/launch" bench tests > "$OUT/launch/check.log" 2>&1; say "launch rc=$?"
cat "$OUT/launch/summary.txt" 2>/dev/null | head -40
pk launch
mkdir -p "$OUT/pool"; say pool
timeout 215 bash tools/compare-allocators.sh full \
  --modes "CUDA_ASYNC,TWO_LEVEL,TWO_LEVEL+gpupool.memory.budget-reclaim=PERIODIC,TWO_LEVEL+gpupool.memory.budget-reclaim=PERIODIC+gpupool.memory.reclaim-order=COLDEST_IN_ORDER,TWO_LEVEL+gpupool.memory.wait-beyond-budget=true+gpupool.memory.reclaim-order=COLDEST_IN_ORDER+gpupool.memory.reclaim-hysteresis=0" \
  --rounds 1 --warmup 3s --duration 10s --drain 5s \
  --server-args "--gpupool.kernels.precision=BF16 --gpupool.serving.queue-capacity=256" \
  --out-dir "$OUT/pool/bf16" > "$OUT/pool/compare.log" 2>&1; say "pool rc=$?"
grep '^|' "$OUT/pool/bf16/comparison.md" | head -12
rm -f "$OUT"/pool/bf16/*.html
pk pool
say done
