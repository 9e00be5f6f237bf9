#!/usr/bin/env bash
# 2026-12-02 final call A (< 10 min): the GPU suite, the pool against cuda-async over 3 rounds (with and without
# request arenas), the capped pool, AllocBench. From the repository root with the bundle (tools/gpu-bundle.sh).
# Knobs: POOL_MODES, ROUNDS (3), CAP_MODES_EXTRA (settings appended to each capped TWO_LEVEL mode).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: $0 OUT}
export BUNDLE=$PWD/dist/gpupool-gpu-bundle.tar.xz
S=$SECONDS
say() { echo "[finalA +$((SECONDS-S))s] $*"; }
pk() { find "$OUT/$1" -name '*.html' -delete; tar -C "$OUT" -czf "$OUT/$1.tgz" "$1" && rm -rf "$OUT/$1"; }
BF16="--gpupool.kernels.precision=BF16 --gpupool.serving.queue-capacity=256"
ARENA=gpupool.serving.request-arena=true
POOL_MODES=${POOL_MODES:-CUDA_ASYNC,TWO_LEVEL,CUDA_ASYNC+$ARENA,TWO_LEVEL+$ARENA}
say "suite"; timeout 100 bash tools/gpu-suite.sh "$OUT/suite" tests > /dev/null 2>&1; say "suite rc=$?"
tail -3 "$OUT/suite/gpu-suite.log"; pk suite
say "pool"; mkdir -p "$OUT/pool"
timeout 370 bash tools/compare-allocators.sh full --modes "$POOL_MODES" --rounds "${ROUNDS:-3}" \
  --warmup 3s --duration 8s --drain 3s --server-args "$BF16" --out-dir "$OUT/pool/bf16" > "$OUT/pool/compare.log" 2>&1
say "pool rc=$?"; grep '^|' "$OUT/pool/bf16/comparison.md" | head -20
CAP=$(python3 - "$OUT/pool/bf16/comparison.json" <<'PY'
import json, statistics, sys
d = json.load(open(sys.argv[1]))
rows = [m for m in d["modes"] if m["mode"] == "CUDA_ASYNC"]
print(int(0.9 * statistics.median(r["pool_peak_reserved_bytes"] for r in rows)))
PY
)
pk pool
say "capped at ${CAP}B"; mkdir -p "$OUT/capped"
timeout 80 bash tools/compare-allocators.sh full \
  --modes "TWO_LEVEL+gpupool.memory.cap-bytes=${CAP}B${CAP_MODES_EXTRA:-},TWO_LEVEL+gpupool.memory.cap-bytes=${CAP}B+$ARENA" \
  --rounds 1 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --out-dir "$OUT/capped/bf16" > "$OUT/capped/compare.log" 2>&1; say "capped rc=$?"
grep '^|' "$OUT/capped/bf16/comparison.md" | head -6; pk capped
say "alloc"; mkdir -p "$OUT/alloc"
W=$(mktemp -d); tar -C "$W" -xJf "$BUNDLE" && timeout 60 "$W/gpupool-gpu-bundle/run-gpu-tests.sh" --main io.gpupool.backend.cuda.AllocBench "$OUT/alloc/alloc-bench.json" 100 > "$OUT/alloc/alloc.log" 2>&1; say "alloc rc=$?"
grep -E '^(pool|pool-global-only|fence) ' "$OUT/alloc/alloc.log" | head -12; grep -E '^pool +(1|16) streams' "$OUT/alloc/alloc.log"; rm -rf "$W"
pk alloc
say done
