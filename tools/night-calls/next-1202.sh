#!/usr/bin/env bash
# The first device call the next session should make (< 10 min), for what 2026-12-02 left unmeasured on main's
# defaults (request arenas on): issue 16's short target against batching off with arenas, issue 15's memory with the
# on-map reclaim beside arenas (rare maps), and the CUDA fault soak with arenas. From the repository root with the
# bundle (tools/gpu-bundle.sh) carried; each stage lands in its own tarball under OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: $0 OUT}
export BUNDLE=$PWD/dist/gpupool-gpu-bundle.tar.xz
S=$SECONDS
say() { echo "[next +$((SECONDS-S))s] $*"; }
pk() { find "$OUT/$1" -name '*.html' -delete; tar -C "$OUT" -czf "$OUT/$1.tgz" "$1" && rm -rf "$OUT/$1"; }
BF16="--gpupool.kernels.precision=BF16 --gpupool.serving.queue-capacity=256"
say "batching"; mkdir -p "$OUT/batching"
timeout 120 bash tools/batching-bench.sh "$OUT/batching" short --warmup 5s --duration 10s --drain 2s \
  > "$OUT/batching/bench.log" 2>&1; say "batching rc=$?"; cat "$OUT/batching/batching.md" 2>/dev/null; pk batching
say "pool"; mkdir -p "$OUT/pool"
timeout 300 bash tools/compare-allocators.sh full --rounds 3 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL,TWO_LEVEL+gpupool.memory.budget-reclaim=ON_MAP" \
  --out-dir "$OUT/pool/bf16" > "$OUT/pool/compare.log" 2>&1; say "pool rc=$?"
grep '^|' "$OUT/pool/bf16/comparison.md" | tail -5; pk pool
say "soak"; mkdir -p "$OUT/soak"
timeout 100 bash tools/soak.sh --backend cuda --duration 30s --concurrency 16 --modes "TWO_LEVEL+gpupool.kernels.precision=BF16" --out-dir "$OUT/soak/run" \
  > "$OUT/soak/soak.log" 2>&1; say "soak rc=$?"; tail -5 "$OUT/soak/soak.log"; pk soak
say done
