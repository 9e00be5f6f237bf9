#!/usr/bin/env bash
# Next session's third device call (< 10 min): batches replaying CUDA graphs on the short workload, against batching on
# with graphs off: packed bf16 batches (graphs off, then on), and the BF16 padded default with graphs on and a row
# ladder up to 128 (the default batch-buckets 1,2,4 leave most batches eager); then BERT-base against torch.compile in
# the cells that had no compiled number on 2026-12-02 and the TF32 column against eager (our forward measured in the same
# call). Knobs: BERT_S (230).
set -uo pipefail
TAG=nextC
source "$(dirname "$0")/call-lib.sh"
G=gpupool.kernels.graphs.enabled=true
P=gpupool.kernels.packed-bf16=true
# lists as indexed settings: SHORT_VARIANTS splits variants at commas
ROWS=$(indexed gpupool.kernels.graphs.batch-buckets 1 2 4 8 16 32 64 128)
say "batch graphs"; mkdir -p "$OUT/graphs"
SHORT_VARIANTS="$P,$P+$G,$G+gpupool.kernels.graphs.max-bytes=8GB$ROWS" timeout 330 bash tools/batching-bench.sh "$OUT/graphs" short --warmup 5s --duration 10s --drain 2s \
  > "$OUT/graphs/bench.log" 2>&1; say "batch graphs rc=$?"; cat "$OUT/graphs/batching.md" 2>/dev/null; pk graphs
say "bert"; mkdir -p "$OUT/bert"
# the TF32 column too (never measured): torch eager tf32 beside ours at TF32, the variants trimmed to fit
PRECISIONS=FP32,BF16,TF32 TORCH_DTYPES="fp32 bf16 tf32" VARIANTS=eager,tuned,graphs \
COMPILE_SHAPES=1x512,32x16,32x128,32x512 TOTAL_S=${BERT_S:-230} GPUPOOL_S=90 timeout $(( ${BERT_S:-230} + 15 )) \
  bash tools/bert-vs-torch.sh "$OUT/bert" > "$OUT/bert/run.log" 2>&1
say "bert rc=$?"; head -40 "$OUT"/bert/bert-vs-torch.md 2>/dev/null; pk bert
say done
