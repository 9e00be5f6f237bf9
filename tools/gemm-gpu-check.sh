#!/usr/bin/env bash
# GEMM choice per shape (gpupool.kernels.gemm-tuning) on a GPU host, in one time-boxed call, from the repository root,
# with the bundle built by tools/gpu-bundle.sh:
#
#   BUNDLE=dist/gpupool-gpu-bundle.tar.xz tools/gemm-gpu-check.sh OUT_DIR [tests] [gemm] [bert]
#                                                                   (no step named = all three, in this order)
#   tests  GemmTuningGpuTest (the measured choice computes the heuristic's products, FP32/TF32/BF16 at BERT shapes;
#          the library's candidates and their twins; timing events), and the tests over the cuBLASLt plans it
#          touches: CublasLtOpsGpuTest, ResidualGemmGpuTest, CudaGraphsCublasLtGpuTest,
#          GpuCublasLtReferenceOutputsTest                          -> OUT_DIR/tests.log, reports-tests/TEST-*.xml
#   gemm   GemmGpuBench: BERT-base's four products at 16..16384 tokens, FP32/TF32/BF16, engines cublaslt (the
#          heuristic's first choice), cublaslt-tuned (the measured choice, named in "chosen") and own
#                                                                   -> OUT_DIR/gemm-bench.json, gemm-bench.log
#   bert   BERT-base (tools/make_bert_base.py, needs python3 with torch and transformers), then BertGpuBench alone
#          (no torch timings): eager, tuned, graphs, tuned-graphs columns, PRECISIONS (BF16,FP32), 1/8/32 x 16/128/512
#          while its budget lasts                                   -> OUT_DIR/bert/bert-gpupool.json, bert-variants.md
# Each step has its own timeout (TESTS_S 50, GEMM_S 30, MODEL_S 45, BERT_S 55): under 3 minutes with the unpacking. OUT_DIR/summary.txt collects the lines worth
# reading. Exit status 0 when every step that ran passed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=${1:?usage: tools/gemm-gpu-check.sh OUT_DIR [tests] [gemm] [bert]}
shift
STEPS=${*:-tests gemm bert}
source tools/gpu-check-lib.sh
gpu_check_start gemm-gpu name,driver_version,memory.total
gpu_check_unpack

if has tests; then
  gpu_check_tests "${TESTS_S:-50}" "$OUT_DIR/tests.log" "$OUT_DIR/reports-tests" \
    io.gpupool.kernels.cuda.GemmTuningGpuTest \
    io.gpupool.kernels.cuda.CublasLtOpsGpuTest \
    io.gpupool.kernels.cuda.ResidualGemmGpuTest \
    io.gpupool.model.graph.CudaGraphsCublasLtGpuTest \
    io.gpupool.model.GpuCublasLtReferenceOutputsTest
  grep '^\[gemm-tuning\]' "$OUT_DIR/tests.log" | head -40 >> "$SUMMARY"
fi

if has gemm; then
  timeout "${GEMM_S:-30}" "${JAVA[@]}" -cp "$CP" io.gpupool.lab.GemmGpuBench "$OUT_DIR/gemm-bench.json" 10 \
    16,128,1024,4096,16384 > "$OUT_DIR/gemm-bench.log" 2>&1
  rc=$?
  [ "$rc" -eq 0 ] || STATUS=1
  say "GemmGpuBench rc=$rc"
  python3 - "$OUT_DIR/gemm-bench.json" >> "$SUMMARY" 2>&1 <<'EOF'
import json, sys
rows = json.load(open(sys.argv[1])).get("results", [])
by = {(r["precision"], r["engine"], r["tokens"], r["in"], r["out"]): r for r in rows}
print("precision tokens in->out: TFLOP/s cublaslt / tuned / own  (tuned's choice)")
for (p, e, t, i, o), r in sorted(by.items()):
    if e != "cublaslt":
        continue
    tuned, own = by.get((p, "cublaslt-tuned", t, i, o), {}), by.get((p, "own", t, i, o), {})
    print(f"{p} {t} {i}->{o}: {r.get('tflops')} / {tuned.get('tflops')} / {own.get('tflops')}  ({tuned.get('chosen')})")
EOF
fi

if has bert; then
  mkdir -p "$OUT_DIR/bert"
  MODEL="$WORK/bert-base"
  if timeout "${MODEL_S:-45}" python3 tools/make_bert_base.py --out "$MODEL" > "$OUT_DIR/make-bert.log" 2>&1; then
    say "model written"
    # the bench stops starting shapes BERT_S - 20 s after its start (JVM start, loads and PTX JIT come first)
    timeout "${BERT_S:-55}" "${JAVA[@]}" -cp "$CP" io.gpupool.lab.BertGpuBench --model "$MODEL" \
      --out "$OUT_DIR/bert/bert-gpupool.json" --precisions "${PRECISIONS:-BF16,FP32}" --batches 1,8,32 \
      --seqs 16,128,512 --warmup 2 --reps 10 --budget-s $(( ${BERT_S:-55} - 20 )) --shape-s 1.5 --profile 1x128 \
      --variants eager,tuned,graphs,tuned-graphs > "$OUT_DIR/bert.log" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] || [ "$rc" -eq 2 ] || STATUS=1
    say "BertGpuBench rc=$rc (2: the budget cut some shapes)"
    python3 tools/bert_vs_torch_table.py "$OUT_DIR/bert/no-torch.json" "$OUT_DIR/bert/bert-gpupool.json" \
      > "$OUT_DIR/bert/bert-variants.md" 2>&1
    grep -E '^\| (1|8|32)x|^- |^## |gpupool error|status' "$OUT_DIR/bert/bert-variants.md" | head -60 >> "$SUMMARY"
  else
    STATUS=1
    say "make_bert_base.py failed (see make-bert.log)"
  fi
fi
say "done, status $STATUS"
exit $STATUS
