#!/usr/bin/env bash
# BERT-base: gpupool's forward against PyTorch eager and torch.compile(mode="reduce-overhead", dynamic=False) on the
# same weights, on one GPU, in one command.
#
#   tools/bert-vs-torch.sh [OUT_DIR]        (default $OUT, else ./out)
#
# Runs from the repository root on the GPU machine, with the GPU bundle built here by tools/gpu-bundle.sh
# (dist/gpupool-gpu-bundle.tar.xz, carried; BUNDLE=... to use another path, or an unpacked
# target/gpu-bundle/gpupool-gpu-bundle if present). Steps, each time-boxed so the whole stays under ~5 min:
#   1. unpack the bundle (JDK + classes) into a scratch folder
#   2. python3 tools/make_bert_base.py: seeded BERT-base (save_pretrained) + reference outputs      (<= 120 s)
#   3. step "torch":   python3 tools/bench_bert_torch.py --model that folder, eager fp32/bf16
#                                                                              -> OUT/bert-torch.json (<= 90 s)
#   4. step "gpupool": BertGpuBench (CUDA, DevicePool, cuBLASLt where it loads; PRECISIONS, default FP32,BF16)
#      on the same folder, in the columns VARIANTS (default eager,tuned,graphs,tuned-graphs: graphs off/on,
#      gpupool.kernels.gemm-tuning off/on; see BertGpuBench)                   -> OUT/bert-gpupool.json
#      (budget: GPUPOOL_S, default 100 s; the JSON is rewritten after every shape)
#   5. step "compile": bench_bert_torch.py --compile: torch.compile(mode="reduce-overhead", dynamic=False), bf16
#      and fp32 (COMPILE_DTYPES), one compile per shape, new shapes started while what is left of TOTAL_S allows,
#      shared fairly: fp32 starts its shapes in the second half, with whatever bf16 left over
#                                                                              -> OUT/bert-torch-compile.json
#   6. tools/bert_vs_torch_table.py (every torch file found in OUT)            -> OUT/bert-vs-torch.md (printed)
# A failing step is logged and the later steps still run on what exists; the exit status is that of the
# first failure (0 when all ran). Writes at most four files under OUT. Knobs: TOTAL_S (default 290), REPS (10),
# STEPS (default "torch gpupool compile": name a subset to run only those, e.g. STEPS=compile in a call of its
# own, then the table from all files with python3 tools/bert_vs_torch_table.py), PRECISIONS, GPUPOOL_S, VARIANTS,
# COMPILE_DTYPES (default "bf16 fp32"), COMPILE_SHAPES, TORCH_DTYPES (eager torch, default "fp32 bf16"; add tf32 with
# PRECISIONS=FP32,BF16,TF32 for the TF32 column);
# for a dry run without a GPU: MODEL_DIR=models/tiny-bert BACKEND=host (skips step 2; the torch steps fail).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=${1:-${OUT:-out}}
mkdir -p "$OUT_DIR"
TOTAL_S=${TOTAL_S:-290}
REPS=${REPS:-10}
STEPS=${STEPS:-torch gpupool compile}
PRECISIONS=${PRECISIONS:-FP32,BF16}
GPUPOOL_S=${GPUPOOL_S:-100}
VARIANTS=${VARIANTS:-eager,tuned,graphs,tuned-graphs}
COMPILE_DTYPES=${COMPILE_DTYPES:-bf16 fp32}
TORCH_DTYPES=${TORCH_DTYPES:-fp32 bf16}
COMPILE_SHAPES=${COMPILE_SHAPES:-1x16,1x128,8x16,8x128,8x512,32x128,32x512,32x16,1x512}
has_step() { case " $STEPS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
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
if has_step torch && [ -f "$MODEL/model.safetensors" ]; then
  # shellcheck disable=SC2086
  timeout 120 python3 tools/bench_bert_torch.py --model "$MODEL" --dtypes $TORCH_DTYPES --reps "$REPS" \
      --out "$OUT_DIR/bert-torch.json" > /dev/null \
    || fail "bench_bert_torch.py (status $?; rows done so far are in the log above)"
fi

# 4. gpupool
if has_step gpupool; then
  LEFT=$((TOTAL_S - (SECONDS - START)))
  BUDGET=$GPUPOOL_S
  [ "$BUDGET" -gt $((LEFT - 45)) ] && BUDGET=$((LEFT - 45))   # JVM start, weight loads and PTX JIT come on top
  if [ -n "$RUNNER" ] && [ -f "$MODEL/model.safetensors" ] && [ "$BUDGET" -gt 10 ]; then
    log "gpupool bench: budget ${BUDGET}s, hard limit $((BUDGET + 40))s"
    timeout --kill-after=5 $((BUDGET + 40)) "$RUNNER" --main io.gpupool.lab.BertGpuBench \
        --model "$MODEL" --out "$OUT_DIR/bert-gpupool.json" --backend "${BACKEND:-cuda}" --precisions "$PRECISIONS" \
        --batches 1,8,32 --seqs 16,128,512 --warmup 3 --reps "$REPS" --budget-s "$BUDGET" --shape-s 3 \
        --variants "$VARIANTS" \
      || { s=$?; [ "$s" -eq 2 ] && log "gpupool bench cut short by its budget (partial results kept)" \
           || fail "gpupool bench (status $s)"; }
  else
    fail "gpupool bench not run (runner '${RUNNER}', budget ${BUDGET}s)"
  fi
fi

# 5. torch.compile(mode="reduce-overhead")
if has_step compile && [ -f "$MODEL/model.safetensors" ]; then
  LEFT=$((TOTAL_S - (SECONDS - START)))
  if [ "$LEFT" -gt 40 ]; then
    log "torch.compile: starting shapes for $((LEFT - 35))s, hard limit $((LEFT - 5))s"
    # shellcheck disable=SC2086
    timeout $((LEFT - 5)) python3 tools/bench_bert_torch.py --model "$MODEL" --compile --dtypes $COMPILE_DTYPES \
        --shapes "$COMPILE_SHAPES" \
        --reps "$REPS" --budget-s $((LEFT - 35)) --out "$OUT_DIR/bert-torch-compile.json" > /dev/null \
      || fail "bench_bert_torch.py --compile (status $?; rows done so far are kept)"
  else
    fail "torch.compile not run (${LEFT}s left)"
  fi
fi

# 6. the table
EXTRA=()
[ -f "$OUT_DIR/bert-torch-compile.json" ] && EXTRA+=("$OUT_DIR/bert-torch-compile.json")
python3 tools/bert_vs_torch_table.py "$OUT_DIR/bert-torch.json" "$OUT_DIR/bert-gpupool.json" "${EXTRA[@]}" \
    > "$OUT_DIR/bert-vs-torch.md" || fail "table"
cat "$OUT_DIR/bert-vs-torch.md" 2>/dev/null
log "done, status $STATUS; files: $(ls "$OUT_DIR" | tr '\n' ' ')"
exit $STATUS
