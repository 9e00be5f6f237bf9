#!/usr/bin/env bash
# Session 16's device call for issue 14's closest cell: FP32 BERT-base at 8x128 and 32x128, ours with the measured
# GEMM choice against torch.compile(mode="reduce-overhead"), three rounds in one call, so the cell's spread between
# runs on one machine is measured rather than guessed. < 10 min.
#   bash tools/night-calls/s16-fp32-tie.sh OUT      (from the repository root, the bundle carried)
set -uo pipefail
TAG=s16-fp32-tie
source "$(dirname "$0")/call-lib.sh"
for round in 1 2 3; do
  say "round $round"; mkdir -p "$OUT/r$round"
  PRECISIONS=FP32 TORCH_DTYPES=fp32 COMPILE_DTYPES=fp32 VARIANTS=eager,tuned COMPILE_SHAPES=8x128,32x128 REPS=20 \
    TOTAL_S=170 GPUPOOL_S=70 timeout 175 bash tools/bert-vs-torch.sh "$OUT/r$round" > "$OUT/r$round/run.log" 2>&1
  say "round $round rc=$?"; grep -E '^\| (8x128|32x128) ' "$OUT/r$round/bert-vs-torch.md" 2>/dev/null
  head -1 "$OUT/r$round/bert-vs-torch.md" 2>/dev/null
done
mkdir -p "$OUT/tie"; mv "$OUT"/r? "$OUT/tie/"; pk tie
say done
