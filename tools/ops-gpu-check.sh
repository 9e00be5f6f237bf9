#!/usr/bin/env bash
# The opt-in LayerNorm / residual kernel paths (gpupool.kernels.residual-in-gemm, gpupool.kernels.warp-layer-norm)
# on a GPU host, in one time-boxed call, from the repository root, with the harness built by
# tools/cuda-harness/build.sh (target/cuda-harness/harness) and the bundle built by tools/gpu-bundle.sh:
#
#   BUNDLE=dist/gpupool-gpu-bundle.tar.xz tools/ops-gpu-check.sh OUT_DIR [harness] [tests] [bench] [residual]
#   (none named: harness tests bench)
#
#   harness  every LayerNorm kernel of ops.ptx against a CPU reference, timings at 16384x768 and 128x768
#                                                                  -> OUT_DIR/harness.json, harness.log
#   tests    ResidualGemmGpuTest, CublasLtOpsGpuTest, CudaTensorOpsGpuTest, BertBatchingGpuTest,
#            GpuCublasLtResidualReferenceOutputsTest (fixtures vs transformers with both paths on), GpuBf16ResidentOutputsTest
#                                                                  -> OUT_DIR/gpu-tests.log, reports/TEST-*.xml
#   residual ResidualGemmBench: linearAddLayerNorm with the residual in the GEMM and without, BERT-base shapes,
#            FP32 and BF16 (~15 s)                                 -> OUT_DIR/residual-gemm-bench.json
#   bench    BERT-base forward (tools/make_bert_base.py, needs python3 with torch and transformers), BertGpuBench
#            with the paths off and on: latency, launches and device time per op kind, error against transformers
#                                                                  -> OUT_DIR/bert-{default,options}.json
# Each step has its own timeout (HARNESS_S 40, TESTS_S 80, RESIDUAL_S 45, MODEL_S 40, BENCH_S 30 per variant;
# PRECISIONS BF16).
# OUT_DIR/summary.txt collects the lines worth reading. Exit status 0 when every step that ran passed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=${1:?usage: tools/ops-gpu-check.sh OUT_DIR [harness] [tests] [bench] [residual]}
shift
STEPS=${*:-harness tests bench}
source tools/gpu-check-lib.sh
gpu_check_start ops-gpu name,driver_version,clocks.sm,clocks.max.sm

if has harness; then
  timeout "${HARNESS_S:-40}" target/cuda-harness/harness src/main/resources/ptx "$OUT_DIR/harness.json" --ops \
    > "$OUT_DIR/harness.log" 2>&1
  rc=$?
  [ "$rc" -eq 0 ] || STATUS=1
  say "harness rc=$rc, checks ok $(grep -c ' ok$' "$OUT_DIR/harness.log"), failed $(grep -c 'FAIL$' "$OUT_DIR/harness.log")"
  grep 'FAIL$' "$OUT_DIR/harness.log" | head -20 >> "$SUMMARY"
  grep -E '^(layernorm|embedding) ' "$OUT_DIR/harness.log" >> "$SUMMARY"
fi

if has tests || has bench || has residual; then
  gpu_check_unpack
fi

if has tests; then
  gpu_check_tests "${TESTS_S:-80}" "$OUT_DIR/gpu-tests.log" "$OUT_DIR/reports" \
    io.gpupool.kernels.cuda.ResidualGemmGpuTest \
    io.gpupool.kernels.cuda.CublasLtOpsGpuTest \
    io.gpupool.kernels.cuda.CudaTensorOpsGpuTest \
    io.gpupool.model.bert.BertBatchingGpuTest \
    io.gpupool.model.GpuCublasLtResidualReferenceOutputsTest \
    io.gpupool.model.GpuBf16ResidentOutputsTest
fi

if has residual; then
  timeout "${RESIDUAL_S:-45}" "${JAVA[@]}" -cp "$CP" io.gpupool.lab.ResidualGemmBench "$OUT_DIR/residual-gemm-bench.json" \
    > "$OUT_DIR/residual-gemm-bench.log" 2>&1
  rc=$?
  [ "$rc" -eq 0 ] || STATUS=1
  say "ResidualGemmBench rc=$rc"
  grep '^\[residual-bench\]' "$OUT_DIR/residual-gemm-bench.log" >> "$SUMMARY"
fi

if has bench; then
  MODEL="$WORK/bert-base"
  if timeout "${MODEL_S:-40}" python3 tools/make_bert_base.py --out "$MODEL" > "$OUT_DIR/make-bert.log" 2>&1; then
    for variant in default options; do
      opts=default                                          # the server's defaults (warp LayerNorm on)
      [ "$variant" = options ] && opts=residual-in-gemm,warp-layer-norm
      timeout "${BENCH_S:-30}" "${JAVA[@]}" -cp "$CP" io.gpupool.lab.BertGpuBench --model "$MODEL" \
        --out "$OUT_DIR/bert-$variant.json" --precisions "${PRECISIONS:-BF16}" --batches 1,32 --seqs 128,512 \
        --warmup 2 --reps 10 --budget-s 18 --shape-s 1.5 --profile 1x128,32x512 --kernel-options "$opts" \
        > "$OUT_DIR/bert-$variant.log" 2>&1
      rc=$?
      say "BertGpuBench $variant ($opts) rc=$rc"
      python3 - "$OUT_DIR/bert-$variant.json" >> "$SUMMARY" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d.get("results", []):
    print("  %-5s %2dx%-4d %-17s %8.3f ms" % (r.get("precision"), r.get("batch"), r.get("seq"), r.get("output"), r.get("ms")))
for p in d.get("profile", []):
    print("  profile", p.get("precision"), p.get("batch"), p.get("seq"), "launches", p.get("launches"),
          "ops", p.get("ops"), "wall_ms", p.get("wall_ms"), "enqueue_ms_total", p.get("enqueue_ms_total"),
          "device", {k: v.get("ms") for k, v in p.get("device_ms", {}).items() if "Norm" in k or "linear" in k})
for a in d.get("accuracy", []):
    print("  accuracy", a)
print("  errors", d.get("errors"), "skipped", len(d.get("skipped", [])))
PY
    done
  else
    say "make_bert_base.py failed (see make-bert.log)"
    STATUS=1
  fi
fi
say "done, status $STATUS"
exit $STATUS
