#!/usr/bin/env bash
# Session 13's third device call (< 8 min): issue 14's last open cell, FP32 32x128 against torch.compile (a tie in
# session 9: 0.999 and 1.02), again with the measured GEMM choice with and without graphs, beside the FP32 cells
# 1x512 and 32x512 for scale. From the repository root with the bundle (tools/gpu-bundle.sh) carried.
set -uo pipefail
TAG=s13C
source "$(dirname "$0")/call-lib.sh"
say "bert"; mkdir -p "$OUT/bert"
PRECISIONS=FP32 TORCH_DTYPES=fp32 COMPILE_DTYPES=fp32 VARIANTS=tuned,tuned-graphs COMPILE_SHAPES=32x128,1x512,32x512 \
  REPS=20 TOTAL_S=260 GPUPOOL_S=90 timeout 300 bash tools/bert-vs-torch.sh "$OUT/bert" > "$OUT/bert/run.log" 2>&1
say "bert rc=$?"; head -30 "$OUT"/bert/bert-vs-torch.md 2>/dev/null; pk bert
say done
