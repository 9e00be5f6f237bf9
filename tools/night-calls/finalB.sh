#!/usr/bin/env bash
# One-off device calls of the 2026-12-01 night session, kept because docs/benchmarks.md quotes them; run from the
# repository root on the GPU machine with the bundle (tools/gpu-bundle.sh) and tools/cuda-harness/build.sh carried.
# Final call B (2026-12-01 night): BERT-base against torch eager / torch.compile, the capped pool, AllocBench.
set -uo pipefail
export BUNDLE=$PWD/dist/gpupool-gpu-bundle.tar.xz
S=$SECONDS
say() { echo "[finalB +$((SECONDS-S))s] $*"; }
pk() { rm -f "$OUT"/$1/*.html "$OUT"/$1/*/*.html; tar -C "$OUT" -czf "$OUT/$1.tgz" "$1" && rm -rf "$OUT/$1"; }
BF16="--gpupool.kernels.precision=BF16 --gpupool.serving.queue-capacity=256"
CAP=${CAP_BYTES:-543581798}
mkdir -p "$OUT/bert"; say bert
TOTAL_S=${BERT_S:-150} timeout $(( ${BERT_S:-150} + 25 )) bash tools/bert-vs-torch.sh "$OUT/bert" > "$OUT/bert/run.log" 2>&1; say "bert rc=$?"
cat "$OUT"/bert/*.md 2>/dev/null | head -30
pk bert
mkdir -p "$OUT/capped"; say capped
timeout 95 bash tools/compare-allocators.sh full \
  --modes "TWO_LEVEL+gpupool.memory.cap-bytes=${CAP}B+gpupool.memory.budget-reclaim=PERIODIC+gpupool.memory.wait-beyond-budget=true,TWO_LEVEL+gpupool.memory.cap-bytes=${CAP}B" \
  --rounds 1 --warmup 3s --duration 10s --drain 5s --server-args "$BF16" \
  --out-dir "$OUT/capped/bf16" > "$OUT/capped/compare.log" 2>&1; say "capped rc=$?"
grep '^|' "$OUT/capped/bf16/comparison.md" | head -10
pk capped
mkdir -p "$OUT/alloc"; say alloc
W=$(mktemp -d); tar -C "$W" -xJf "$BUNDLE" && timeout 50 "$W/gpupool-gpu-bundle/run-gpu-tests.sh" --main io.gpupool.backend.cuda.AllocBench "$OUT/alloc/alloc-bench.json" 60 > "$OUT/alloc/alloc.log" 2>&1; say "alloc rc=$?"
grep -E '^pool  |^pool-global-only  .* 2097152 B|streams' "$OUT/alloc/alloc.log" | head -30; rm -rf "$W"
pk alloc
mkdir -p "$OUT/ops"; say ops
timeout 60 tools/ops-gpu-check.sh "$OUT/ops" harness residual > "$OUT/ops/check.log" 2>&1; say "ops rc=$?"
grep -iE "unfused|residual|checks" "$OUT/ops/summary.txt" 2>/dev/null | head -12
pk ops
say done
