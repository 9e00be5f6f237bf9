#!/usr/bin/env bash
# CUDA graphs on a GPU host, in one time-boxed call, with the bundle built by tools/gpu-bundle.sh:
#
#   BUNDLE=dist/gpupool-gpu-bundle.tar.xz tools/graphs-gpu-check.sh OUT_DIR
#
#   1. the graph GPU tests (CudaGraphsGpuTest; CudaBatchGraphsGpuTest: graphs of packed batches by token bucket;
#      CudaGraphCaptureGpuTest: capture failure and recovery on the driver; CudaGraphsCublasLtGpuTest: cuBLASLt
#      FP32/BF16 graphs under concurrent load), the CUDA serving test and the FP32 reference outputs
#                                                             -> OUT_DIR/graphs-tests.log, TEST-*.xml
#   2. GraphsGpuBench: BERT-base latency with graphs off and on, FP32 and BF16, 1x16 1x128 8x128 8x100
#                                                                  -> OUT_DIR/graphs-bench.json, graphs-bench.log
# Each step has its own timeout (TESTS_S, default 150; BENCH_S, default 120). Exit status: 0 when both passed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=${1:?usage: tools/graphs-gpu-check.sh OUT_DIR}
mkdir -p "$OUT_DIR"
BUNDLE=${BUNDLE:-dist/gpupool-gpu-bundle.tar.xz}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/graphs-gpu.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
STATUS=0
say() { echo "[graphs-gpu +${SECONDS}s] $*" | tee -a "$OUT_DIR/graphs-gpu.log"; }

say "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo none)"
tar -C "$WORK" -xJf "$BUNDLE" || { say "cannot unpack $BUNDLE"; exit 1; }
B="$WORK/gpupool-gpu-bundle"
JAVA="$B/runtime/bin/java"
CP="$B/app/gpupool.jar:$B/test-classes:$B/lib/*"
say "unpacked"

timeout "${TESTS_S:-150}" "$JAVA" --enable-native-access=ALL-UNNAMED -XX:+EnableDynamicAgentLoading \
  -cp "$B/tools/junit-platform-console-standalone.jar:$CP" org.junit.platform.console.ConsoleLauncher execute \
  --disable-banner --disable-ansi-colors --details=tree --include-engine=junit-jupiter \
  --select-class=io.gpupool.model.graph.CudaGraphsGpuTest \
  --select-class=io.gpupool.model.graph.CudaBatchGraphsGpuTest \
  --select-class=io.gpupool.backend.cuda.CudaGraphCaptureGpuTest \
  --select-class=io.gpupool.model.graph.CudaGraphsCublasLtGpuTest \
  --select-class=io.gpupool.serving.CudaServingApplicationGpuTest \
  --select-class=io.gpupool.model.GpuReferenceOutputsTest \
  --reports-dir="$OUT_DIR" > "$OUT_DIR/graphs-tests.log" 2>&1 || STATUS=1
say "tests: $(grep -E 'tests (successful|failed|aborted)' "$OUT_DIR/graphs-tests.log" | tr -s ' ' | tr '\n' ' ')"

timeout "${BENCH_S:-120}" "$JAVA" --enable-native-access=ALL-UNNAMED -cp "$CP" io.gpupool.lab.GraphsGpuBench \
  "$OUT_DIR/graphs-bench.json" --reps 50 > "$OUT_DIR/graphs-bench.log" 2>&1 || STATUS=1
grep "graphs-bench" "$OUT_DIR/graphs-bench.log" | tail -12 | tee -a "$OUT_DIR/graphs-gpu.log" > /dev/null
say "done, status $STATUS"
exit $STATUS
