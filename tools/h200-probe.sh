#!/usr/bin/env bash
# Evidence for where the pool and the batcher lose time under live load on the GPU machine, in one device call
# (~6 min): allocator variants on the BF16 default workload, and Java Flight Recordings of the server under the
# default workload and under the short batching workload. Runs from the repository root with the bundle
# (BUNDLE, default dist/gpupool-gpu-bundle.tar.xz); everything lands in OUT/h200-probe.tgz.
#
#   tools/h200-probe.sh OUT [variants] [jfr-pool] [jfr-batching] [grid]     (the first three by default)
#
# variants      cuda-async, TWO_LEVEL defaults, and the growth settings that trade map/unmap calls for memory:
#               mapped-slack 1.0 (reclaims only beyond twice the high-water mark), ON_DEMAND growth (no
#               mapping at all), wait-beyond-budget; one round each
# jfr-pool      TWO_LEVEL defaults with a flight recording (profile settings) of the server
# jfr-batching  the short batching workload (tools/batching-bench.sh short) with a flight recording per server
# grid          GRID_MODES (compare-allocators modes, comma-separated), one round each on the same workload
# Read the recordings here with `jfr view hot-methods FILE`, `jfr print --events jdk.ExecutionSample FILE`.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: tools/h200-probe.sh OUT [variants] [jfr-pool] [jfr-batching]}
shift
STAGES="${*:-variants jfr-pool jfr-batching}"
export BUNDLE=${BUNDLE:-$PWD/dist/gpupool-gpu-bundle.tar.xz}
mkdir -p "$OUT"
W=$(mktemp -d "${TMPDIR:-/tmp}/h200-probe.XXXXXX")
LOG=$W/probe.log
say() { echo "[h200-probe +${SECONDS}s] $*" | tee -a "$LOG"; }
pack() { tar -C "$W" -czf "$OUT/h200-probe.tgz" . 2>/dev/null; }
BF16="--gpupool.kernels.precision=BF16 --gpupool.serving.queue-capacity=256"
jfr() { echo "-XX:StartFlightRecording=filename=$W/jfr/$1-%p.jfr,settings=profile,dumponexit=true"; }
mkdir -p "$W/jfr"
say "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo none)"
for stage in $STAGES; do
  say "stage $stage"
  case "$stage" in
    variants)
      timeout 260 bash tools/compare-allocators.sh full \
        --modes "CUDA_ASYNC,TWO_LEVEL,TWO_LEVEL+gpupool.memory.mapped-slack=1.0,TWO_LEVEL+gpupool.memory.growth-policy=ON_DEMAND,TWO_LEVEL+gpupool.memory.wait-beyond-budget=true" \
        --rounds 1 --warmup 3s --duration 10s --drain 5s --server-args "$BF16" \
        --out-dir "$W/variants" >> "$LOG" 2>&1 ;;
    jfr-pool)
      timeout 90 bash tools/compare-allocators.sh full --modes TWO_LEVEL \
        --rounds 1 --warmup 3s --duration 10s --drain 5s --server-args "$BF16" --jvm-opts "$(jfr pool)" \
        --out-dir "$W/jfr-pool" >> "$LOG" 2>&1 ;;
    jfr-batching)
      timeout 150 bash tools/batching-bench.sh "$W/batching" short --warmup 3s --duration 12s --drain 5s \
        --jvm-opts "$(jfr batching)" >> "$LOG" 2>&1 ;;
    grid)
      timeout 400 bash tools/compare-allocators.sh full --modes "${GRID_MODES:?grid needs GRID_MODES}" \
        --rounds 1 --warmup 3s --duration 10s --drain 5s --server-args "$BF16" \
        --out-dir "$W/grid" >> "$LOG" 2>&1 ;;
    *) say "unknown stage $stage" ;;
  esac
  say "stage $stage rc=$?"
  pack
done
ls -la "$W/jfr" >> "$LOG" 2>&1
pack
say "done: $OUT/h200-probe.tgz"
