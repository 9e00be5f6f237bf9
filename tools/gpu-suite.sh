#!/usr/bin/env bash
# The whole GPU suite on a GPU host, from the repository root, with the bundle built by tools/gpu-bundle.sh:
#
#   tools/gpu-suite.sh OUT_DIR [tests] [alloc] [bert] [vmm] (no step named = tests alloc bert)
#
#   tests  every test tagged gpu          -> OUT_DIR/gpu-tests.xml, summary line in OUT_DIR/gpu-suite.log
#   alloc  AllocBench: alloc+free pairs, pool vs direct vs cuda-async, 1/4/8/16 streams -> OUT_DIR/alloc-bench.json
#   bert   tools/bert-vs-torch.sh: BERT-base forward against PyTorch eager -> OUT_DIR/bert-*.json, bert-vs-torch.md
#   vmm    (only when named) VmmCostBench: cost of map/unmap of granules, and which driver calls wait for a
#          kernel running on another stream -> OUT_DIR/vmm-cost.json
#
# Needs only the NVIDIA driver (and python3 with torch/transformers for "bert"); no JDK, no Maven.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=${1:?usage: tools/gpu-suite.sh OUT_DIR [tests] [alloc] [bert] [vmm]}
shift
STEPS=${*:-tests alloc bert}
BUNDLE=${BUNDLE:-dist/gpupool-gpu-bundle.tar.xz}
mkdir -p "$OUT_DIR"
LOG="$OUT_DIR/gpu-suite.log"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-suite.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
STATUS=0
say() { echo "[gpu-suite +${SECONDS}s] $*" | tee -a "$LOG"; }

say "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo none)"
tar -C "$WORK" -xJf "$BUNDLE" || { say "cannot unpack $BUNDLE"; exit 1; }
RUN="$WORK/gpupool-gpu-bundle/run-gpu-tests.sh"

for step in $STEPS; do
  case "$step" in
    tests)
      say "gpu-tagged tests"
      "$RUN" "$WORK/reports" > "$WORK/tests.log" 2>&1 || STATUS=1
      grep -E "✘|MethodSource|Exception|expected|but was" "$WORK/tests.log" | head -60 >> "$LOG"
      cp "$WORK"/reports/TEST-*.xml "$OUT_DIR/gpu-tests.xml" 2>/dev/null
      say "tests: $(tail -1 "$WORK/tests.log")"
      ;;
    alloc)
      say "AllocBench"
      timeout 300 "$RUN" --main io.gpupool.backend.cuda.AllocBench "$OUT_DIR/alloc-bench.json" 150 \
        > "$WORK/alloc.log" 2>&1 || { STATUS=1; tail -20 "$WORK/alloc.log" >> "$LOG"; }
      tail -40 "$WORK/alloc.log" | tee -a "$LOG" > /dev/null
      ;;
    bert)
      say "BERT-base against PyTorch"
      BUNDLE="$BUNDLE" bash tools/bert-vs-torch.sh "$OUT_DIR" >> "$LOG" 2>&1 || STATUS=1
      ;;
    vmm)
      say "VmmCostBench"
      timeout 300 "$RUN" --main io.gpupool.backend.cuda.VmmCostBench "$OUT_DIR/vmm-cost.json" 200 \
        > "$WORK/vmm.log" 2>&1 || { STATUS=1; tail -20 "$WORK/vmm.log" >> "$LOG"; }
      tail -40 "$WORK/vmm.log" | tee -a "$LOG" > /dev/null
      ;;
    *) say "unknown step $step"; STATUS=1 ;;
  esac
done
say "done, status $STATUS"
exit $STATUS
