#!/usr/bin/env bash
# Session 11's second device call (< 10 min). 1) The BF16 default workload, 2 rounds, with the allocation trace of
# every measured phase (LoadDriver --allocation-trace; tools/trace-lifetimes.py reads them): why the load's own peak of
# requested bytes runs higher in the pool's rounds than in cuda-async's, beside the reclaim that leaves the large
# chunks' free runs mapped for last (reclaim-order SMALL_CHUNKS_FIRST). 2) The short-request workload, 2 rounds.
# 3) FP32, 2 rounds. From the repository root with the bundle (tools/gpu-bundle.sh) and target/cuda-harness carried.
set -uo pipefail
TAG=s11B
source "$(dirname "$0")/call-lib.sh"
export GPUPOOL_SECURITY_OPERATOR_PASSWORD=trace-$RANDOM      # the trace endpoints are operator-only
mkdir -p "$OUT/pool"
timeout 230 bash tools/compare-allocators.sh full --rounds 2 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --allocation-trace --modes "CUDA_ASYNC,TWO_LEVEL,TWO_LEVEL+gpupool.memory.reclaim-order=SMALL_CHUNKS_FIRST" \
  --out-dir "$OUT/pool/bf16" > "$OUT/pool/bf16.log" 2>&1; say "bf16 rc=$?"; grep '^|' "$OUT/pool/bf16/comparison.md" | tail -4
python3 tools/trace-lifetimes.py "$OUT"/pool/bf16/*-trace-*.csv --json "$OUT/pool/bf16/lifetimes.json" 2>&1 | head -60
xz -T0 -6 "$OUT"/pool/bf16/*-trace-*.csv
timeout 135 bash tools/compare-allocators.sh full --rounds 2 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL" "${SHORT[@]}" --out-dir "$OUT/pool/short" > "$OUT/pool/short.log" 2>&1
say "short rc=$?"; grep '^|' "$OUT/pool/short/comparison.md" | tail -3
timeout 140 bash tools/compare-allocators.sh full --rounds 2 --warmup 3s --duration 8s --drain 3s \
  --server-args "--gpupool.serving.queue-capacity=256" --modes "CUDA_ASYNC,TWO_LEVEL" --out-dir "$OUT/pool/fp32" \
  > "$OUT/pool/fp32.log" 2>&1; say "fp32 rc=$?"; grep '^|' "$OUT/pool/fp32/comparison.md" | tail -3
pk pool
say done
