#!/usr/bin/env bash
# What the open issues still need measured on the GPU machine, packed into device calls that each fit the
# 10-minute limit. Runs from the repository root with the bundle built here by tools/gpu-bundle.sh (BUNDLE,
# default dist/gpupool-gpu-bundle.tar.xz) and packs every result into one archive, OUT/h200-<call>.tgz,
# rewritten after each stage so that a call cut short still returns what ran.
#
#   tools/h200-session.sh OUT 1|2|3|4        one call's stages (below), in this order of priority
#   tools/h200-session.sh OUT STAGE...       named stages only
#
# Call 1 (~9 min)  tests graphs soak
#   tests     every GPU-tagged test (graph capture under load, released workspaces, physical handles, packed bf16)
#   graphs    graph GPU tests and graph latency, off against on                            (issue 14 item 4)
#   soak      fault soak on CUDA at BF16, graphs off and on: 0 unexpected 5xx, drained to 0 (issue 18)
# Call 2 (~9 min)  pool
#   pool      default workload at BF16, 2 rounds: cuda-async, TWO_LEVEL, and TWO_LEVEL capped at CAP_BYTES
#             with memory admission (issue 15: req/s, peak reserved, p99; no 507 under the cap)
# Call 3 (~9 min)  batching
#   batching  short requests and 32x512, batching on against off, plus packed bf16 (issue 16's targets)
# Call 4 (~8 min)  alloc handles bert
#   alloc     AllocBench and VmmCostBench (issue 15's hot-path targets; map/unmap of kept handles)
#   handles   capped default workload with retained physical handles on, against off (maps, creates)
#   bert      BERT-base against torch eager and torch.compile (issue 14's table)
# Not in a numbered call:
#   reclaim   default workload at BF16, 2 rounds: cuda-async, TWO_LEVEL, and TWO_LEVEL with the budget reclaim
#             in maintenance (gpupool.memory.budget-reclaim=PERIODIC), alone and with EXTRA_MODES (a comma list)
#
# The device takes the working tree plus the carried bundle up to 64 MiB; with the bundle at 57 MiB that is
# tight: when a call is refused as too large, move src/main/resources/ptx/gemm.ptx and attention.ptx aside for
# the call (the bundle's jar carries them) and put them back afterwards.
# Each stage has its own timeout; a failing stage is logged and the next one still runs. CAP_BYTES is the
# cap for "pool" and "handles": 0.9 x cuda-async's peak reserved on the BF16 default workload (512 MiB when
# last measured); the cuda-async row of the same run shows whether that still holds.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: tools/h200-session.sh OUT 1|2|3|4|STAGE...}
shift
case "${1:-}" in
  1) NAME=call1; STAGES="tests graphs soak" ;;
  2) NAME=call2; STAGES="pool" ;;
  3) NAME=call3; STAGES="batching" ;;
  4) NAME=call4; STAGES="alloc handles bert" ;;
  *) NAME=stages; STAGES="$*" ;;
esac
export BUNDLE=${BUNDLE:-$PWD/dist/gpupool-gpu-bundle.tar.xz}
mkdir -p "$OUT"
W=$(mktemp -d "${TMPDIR:-/tmp}/h200-session.XXXXXX")
LOG=$W/session.log
say() { echo "[h200-session +${SECONDS}s] $*" | tee -a "$LOG"; }
pack() { tar -C "$W" -czf "$OUT/h200-$NAME.tgz" . 2>/dev/null; }
CAP_BYTES=${CAP_BYTES:-483183820}
# --server-args replaces the preset's, so the queue capacity the full preset sets is repeated here.
BF16="--gpupool.kernels.precision=BF16 --gpupool.serving.queue-capacity=256"
CAPPED="TWO_LEVEL+gpupool.memory.cap-bytes=${CAP_BYTES}B"

say "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo none)"
for stage in $STAGES; do
  case "$stage" in
    tests)
      timeout 190 bash tools/gpu-suite.sh "$W/suite" tests >> "$LOG" 2>&1 ;;
    graphs)
      TESTS_S=140 BENCH_S=50 timeout 200 bash tools/graphs-gpu-check.sh "$W/graphs" >> "$LOG" 2>&1 ;;
    soak)
      # The settings go in --modes: a --server-args would replace the soak's fault injection.
      timeout 180 bash tools/soak.sh --backend cuda --duration 30s --concurrency 16 --out-dir "$W/soak" \
        --modes "TWO_LEVEL+gpupool.kernels.precision=BF16,TWO_LEVEL+gpupool.kernels.precision=BF16+gpupool.kernels.graphs.enabled=true" \
        >> "$LOG" 2>&1 ;;
    pool)
      timeout 560 bash tools/compare-allocators.sh full --modes "CUDA_ASYNC,TWO_LEVEL,$CAPPED" \
        --rounds 2 --warmup 3s --duration 10s --drain 5s --server-args "$BF16" \
        --out-dir "$W/pool-bf16" >> "$LOG" 2>&1 ;;
    batching)
      PACKED_BF16=1 timeout 560 bash tools/batching-bench.sh "$W/batching" both \
        --warmup 3s --duration 12s --drain 5s >> "$LOG" 2>&1 ;;
    reclaim)
      timeout 420 bash tools/compare-allocators.sh full \
        --modes "CUDA_ASYNC,TWO_LEVEL,TWO_LEVEL+gpupool.memory.budget-reclaim=PERIODIC${EXTRA_MODES:+,$EXTRA_MODES}" \
        --rounds 2 --warmup 3s --duration 10s --drain 5s --server-args "$BF16" \
        --out-dir "$W/reclaim-bf16" >> "$LOG" 2>&1 ;;
    alloc)
      timeout 150 bash tools/gpu-suite.sh "$W/alloc" alloc vmm >> "$LOG" 2>&1 ;;
    handles)
      timeout 200 bash tools/compare-allocators.sh full \
        --modes "$CAPPED,$CAPPED+gpupool.memory.retained-handle-bytes=256MB" \
        --rounds 1 --warmup 3s --duration 12s --drain 5s --server-args "$BF16" \
        --out-dir "$W/handles-bf16" >> "$LOG" 2>&1 ;;
    bert)
      TOTAL_S=200 timeout 230 bash tools/bert-vs-torch.sh "$W/bert" >> "$LOG" 2>&1 ;;
    *)
      say "unknown stage $stage"; false ;;
  esac
  say "$stage rc=$?"
  pack
done
say "done: $OUT/h200-$NAME.tgz"
pack
