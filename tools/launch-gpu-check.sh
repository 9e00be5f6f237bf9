#!/usr/bin/env bash
# Kernel launches on a GPU host, in one time-boxed call, with the bundle built by tools/gpu-bundle.sh:
#
#   BUNDLE=dist/gpupool-gpu-bundle.tar.xz tools/launch-gpu-check.sh OUT_DIR [bench] [tests] [forward] [models]
#                                                                   (no step named = all four, in this order)
#   bench   LaunchBench: host microseconds per launch through JCuda and through FFM, a trivial kernel with
#           11 arguments and one with none                          -> OUT_DIR/launch-bench.json, launch-bench.log
#   tests   the backend's launch tests on both paths (CudaKernelLaunchGpuTest), the CUDA backend, stream and
#           graph-capture tests                                    -> OUT_DIR/tests-backend.log, TEST-*.xml
#   forward GraphsGpuBench with graphs off: eager BERT-base forward latency, BF16 and FP32 at 1x16 1x128 8x128,
#           launches through JCuda, then through FFM                -> OUT_DIR/forward-{jcuda,ffm}.json/.log
#   models  the kernels and models that launch through the default path: CUDA tensor ops, cuBLASLt ops,
#           graphs, FP32 reference outputs, BF16-resident outputs   -> OUT_DIR/tests-models.log, TEST-*.xml
# Each step has its own timeout (BENCH_S 40, TESTS_S 50, FORWARD_S 27 per path, MODELS_S 45). Exit status: 0 when all passed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=${1:?usage: tools/launch-gpu-check.sh OUT_DIR [bench] [tests] [forward] [models]}
shift
STEPS=${*:-bench tests forward models}
mkdir -p "$OUT_DIR"
BUNDLE=${BUNDLE:-dist/gpupool-gpu-bundle.tar.xz}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/launch-gpu.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
STATUS=0
SUMMARY="$OUT_DIR/summary.txt"
say() { echo "[launch-gpu +${SECONDS}s] $*" | tee -a "$SUMMARY"; }

say "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo none)"
tar -C "$WORK" -xJf "$BUNDLE" || { say "cannot unpack $BUNDLE"; exit 1; }
B="$WORK/gpupool-gpu-bundle"
JAVA="$B/runtime/bin/java"
CP="$B/app/gpupool.jar:$B/test-classes:$B/lib/*"
say "unpacked"

junit() { # junit TIMEOUT LOG CLASS...
  local limit=$1 log=$2; shift 2
  local selects=()
  for class in "$@"; do selects+=("--select-class=$class"); done
  timeout "$limit" "$JAVA" --enable-native-access=ALL-UNNAMED -XX:+EnableDynamicAgentLoading \
    -cp "$B/tools/junit-platform-console-standalone.jar:$CP" org.junit.platform.console.ConsoleLauncher execute \
    --disable-banner --disable-ansi-colors --details=tree --include-engine=junit-jupiter \
    "${selects[@]}" --reports-dir="$OUT_DIR/reports-$(basename "$log" .log)" > "$OUT_DIR/$log" 2>&1
}

for step in $STEPS; do
  case "$step" in
    bench)
      timeout "${BENCH_S:-40}" "$JAVA" --enable-native-access=ALL-UNNAMED -cp "$CP" io.gpupool.backend.cuda.LaunchBench \
        "$OUT_DIR/launch-bench.json" 512 60 > "$OUT_DIR/launch-bench.log" 2>&1 || STATUS=1
      grep "launch-bench" "$OUT_DIR/launch-bench.log" | tee -a "$SUMMARY" > /dev/null
      say "bench done"
      ;;
    tests)
      junit "${TESTS_S:-50}" tests-backend.log io.gpupool.backend.cuda.CudaKernelLaunchGpuTest \
        io.gpupool.backend.cuda.CudaBackendGpuTest io.gpupool.backend.cuda.CudaDeviceStreamGpuTest \
        io.gpupool.backend.cuda.CudaGraphCaptureGpuTest || STATUS=1
      say "backend tests: $(grep -E 'tests (successful|failed|aborted|skipped)' "$OUT_DIR/tests-backend.log" | tr -s ' ' | tr '\n' ' ')"
      grep -E "✘" "$OUT_DIR/tests-backend.log" | head -20 >> "$SUMMARY"
      ;;
    forward)
      for path in jcuda ffm; do
        timeout "${FORWARD_S:-27}" "$JAVA" --enable-native-access=ALL-UNNAMED -cp "$CP" io.gpupool.lab.GraphsGpuBench \
          "$OUT_DIR/forward-$path.json" --graphs off --launch "$path" --precisions BF16,FP32 --shapes 1x16,1x128,8x128 \
          --reps 30 --warmup 5 > "$OUT_DIR/forward-$path.log" 2>&1 || STATUS=1
        grep "eager_ms" "$OUT_DIR/forward-$path.log" | sed "s/^/$path /" | tee -a "$SUMMARY" > /dev/null
      done
      say "forward done"
      ;;
    models)
      junit "${MODELS_S:-45}" tests-models.log io.gpupool.kernels.cuda.CudaTensorOpsGpuTest \
        io.gpupool.kernels.cuda.CublasLtOpsGpuTest io.gpupool.model.graph.CudaGraphsGpuTest \
        io.gpupool.model.GpuReferenceOutputsTest io.gpupool.model.GpuBf16ResidentOutputsTest || STATUS=1
      say "model tests: $(grep -E 'tests (successful|failed|aborted|skipped)' "$OUT_DIR/tests-models.log" | tr -s ' ' | tr '\n' ' ')"
      grep -E "✘" "$OUT_DIR/tests-models.log" | head -20 >> "$SUMMARY"
      ;;
    *) say "unknown step $step"; STATUS=1 ;;
  esac
done
say "done, status $STATUS"
exit $STATUS
