#!/usr/bin/env bash
# BERT-base: gpupool's forward against PyTorch eager on the same weights, on one GPU, in one command.
#
#   tools/bert-vs-torch.sh [OUT_DIR]        (default $OUT, else ./out)
#
# Runs from the repository root on the GPU machine, with the GPU bundle built here by tools/gpu-bundle.sh
# (dist/gpupool-gpu-bundle.tar.xz, carried; BUNDLE=... to use another path, or an unpacked
# target/gpu-bundle/gpupool-gpu-bundle if present). Steps, each time-boxed so the whole stays under ~5 min:
#   1. unpack the bundle (JDK + classes) into a scratch folder
#   2. python3 tools/make_bert_base.py: seeded BERT-base (save_pretrained) + reference outputs      (<= 120 s)
#   3. python3 tools/bench_bert_torch.py --model that folder, fp32/tf32/bf16   -> OUT/bert-torch.json (<= 130 s)
#   4. BertGpuBench (CUDA, DevicePool; FP32, BF16, TF32, then TF32X3, the newest kernel, last)
#      on the same folder                                                        -> OUT/bert-gpupool.json
#      (budget: what is left of ~280 s; the JSON is rewritten after every shape)
#   5. tools/bert_vs_torch_table.py                                            -> OUT/bert-vs-torch.md (printed)
# A failing step is logged and the later steps still run on what exists; the exit status is that of the
# first failure (0 when all ran). Writes exactly three files under OUT. Knobs: TOTAL_S (default 280), REPS (10);
# for a dry run without a GPU: MODEL_DIR=models/tiny-bert BACKEND=host (skips step 2; step 3 fails without torch).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=${1:-${OUT:-out}}
mkdir -p "$OUT_DIR"
TOTAL_S=${TOTAL_S:-280}
REPS=${REPS:-10}
START=$SECONDS
STATUS=0
log() { echo "[bert-vs-torch +$((SECONDS - START))s] $*"; }
fail() { log "FAILED: $*"; [ "$STATUS" -ne 0 ] || STATUS=1; }
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false   # everything is local
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bert-vs-torch.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

log "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader 2>/dev/null || echo unknown)"

# 1. the bundle
BUNDLE=${BUNDLE:-dist/gpupool-gpu-bundle.tar.xz}
RUNNER=""
if [ -x target/gpu-bundle/gpupool-gpu-bundle/run-gpu-tests.sh ]; then
  RUNNER=target/gpu-bundle/gpupool-gpu-bundle/run-gpu-tests.sh
elif [ -f "$BUNDLE" ]; then
  if tar -C "$WORK" -xJf "$BUNDLE" 2>/dev/null || python3 -c 'import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    t.extractall(sys.argv[2], filter="tar") if hasattr(tarfile, "tar_filter") else t.extractall(sys.argv[2])' \
      "$BUNDLE" "$WORK"; then
    RUNNER="$WORK/gpupool-gpu-bundle/run-gpu-tests.sh"
  else
    fail "cannot unpack $BUNDLE"
  fi
else
  fail "no GPU bundle at $BUNDLE (build it with tools/gpu-bundle.sh and carry it)"
fi
log "bundle: ${RUNNER:-none}"

# 2. the shared model
MODEL=${MODEL_DIR:-$WORK/bert-base}
if [ -n "${MODEL_DIR:-}" ]; then
  log "model: $MODEL (given)"
elif timeout 120 python3 tools/make_bert_base.py --out "$MODEL"; then
  log "model: $(du -sh "$MODEL" | cut -f1) in $MODEL"
else
  fail "make_bert_base.py (status $?)"
fi

# 3. PyTorch eager
if [ -f "$MODEL/model.safetensors" ]; then
  timeout 130 python3 tools/bench_bert_torch.py --model "$MODEL" --dtypes fp32 tf32 bf16 --reps "$REPS" \
      --out "$OUT_DIR/bert-torch.json" > /dev/null \
    || fail "bench_bert_torch.py (status $?; rows done so far are in the log above)"
fi

# 4. gpupool
LEFT=$((TOTAL_S - (SECONDS - START)))
BUDGET=$((LEFT - 45))          # JVM start, weight load and PTX JIT are outside the bench's own budget
if [ -n "$RUNNER" ] && [ -f "$MODEL/model.safetensors" ] && [ "$BUDGET" -gt 10 ]; then
  log "gpupool bench: budget ${BUDGET}s, hard limit $((LEFT - 5))s"
  timeout --kill-after=5 $((LEFT - 5)) "$RUNNER" --main io.gpupool.lab.BertGpuBench \
      --model "$MODEL" --out "$OUT_DIR/bert-gpupool.json" --backend "${BACKEND:-cuda}" --precisions FP32,BF16,TF32,TF32X3 \
      --batches 1,8,32 --seqs 16,128,512 --warmup 3 --reps "$REPS" --budget-s "$BUDGET" --shape-s 3 \
    || { s=$?; [ "$s" -eq 2 ] && log "gpupool bench cut short by its budget (partial results kept)" \
         || fail "gpupool bench (status $s)"; }
else
  fail "gpupool bench not run (runner '${RUNNER}', budget ${BUDGET}s)"
fi

# 5. the table
python3 tools/bert_vs_torch_table.py "$OUT_DIR/bert-torch.json" "$OUT_DIR/bert-gpupool.json" \
    > "$OUT_DIR/bert-vs-torch.md" || fail "table"
cat "$OUT_DIR/bert-vs-torch.md" 2>/dev/null
log "done, status $STATUS; files: $(ls "$OUT_DIR" | tr '\n' ' ')"
exit $STATUS
