#!/usr/bin/env bash
# Session 14's device calls for issue 14's table in one run per precision: BERT-base, all nine shapes {1, 8, 32} x
# {16, 128, 512}, ours (eager, graphs and/or the measured GEMM choice) against PyTorch eager and
# torch.compile(mode="reduce-overhead") in the same call, so each cell's ratio comes from one run. < 10 min each.
#   bash tools/night-calls/s14-bert.sh OUT BF16|FP32      (from the repository root, the bundle carried)
set -uo pipefail
PREC=${2:?precision BF16 or FP32}
TAG=s14-$PREC
source "$(dirname "$0")/call-lib.sh"
case $PREC in
  BF16) DT=bf16; VARIANTS=eager,graphs,tuned-graphs ;;
  FP32) DT=fp32; VARIANTS=eager,tuned,tuned-graphs ;;
  *) echo "precision BF16 or FP32" >&2; exit 2 ;;
esac
say "bert $PREC"; mkdir -p "$OUT/bert"
PRECISIONS=$PREC TORCH_DTYPES=$DT COMPILE_DTYPES=$DT VARIANTS=$VARIANTS REPS=20 TOTAL_S=500 GPUPOOL_S=120 \
  timeout 560 bash tools/bert-vs-torch.sh "$OUT/bert" > "$OUT/bert/run.log" 2>&1
say "bert rc=$?"; cat "$OUT"/bert/bert-vs-torch.md 2>/dev/null | head -40; grep -c '' "$OUT/bert/run.log"
cp "$OUT"/bert/bert-vs-torch.md "$OUT/table.md" 2>/dev/null; pk bert
say done
