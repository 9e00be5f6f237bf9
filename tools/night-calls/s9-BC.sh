#!/usr/bin/env bash
# Session 9's second device call (< 10 min), calls B and C in one: issue 15's other targets on the new defaults (lazy
# fences on), 3 rounds each: the pool capped at 0.9x cuda-async's peak reserved bytes on the BF16 default workload
# (cuda-async's median in call A: 480 MiB, so 432 MiB), FP32 on the default workload. Then where the BF16 p99 goes
# (call A: 490-980 maps and about as many unmaps per run on serving threads, ~0.8 ms each; ON_MAP unmaps before it maps
# beyond the budget), 2 rounds: the budget reclaimed by maintenance (PERIODIC) once a second and every 100 ms, and 128 MB
# of unmapped physical memory kept to map again. Last the CUDA fault soak (the pool drains to 0).
set -uo pipefail
TAG=s9BC
source "$(dirname "$0")/call-lib.sh"
mkdir -p "$OUT/pool"
CAP=$((480 * 1048576 * 9 / 10))
timeout 160 bash tools/compare-allocators.sh full --rounds 3 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL+gpupool.memory.cap-bytes=${CAP}B" --out-dir "$OUT/pool/capped" > "$OUT/pool/capped.log" 2>&1
say "capped at ${CAP}B rc=$?"; grep '^|' "$OUT/pool/capped/comparison.md" | tail -3
timeout 160 bash tools/compare-allocators.sh full --rounds 3 --warmup 3s --duration 8s --drain 3s \
  --server-args "--gpupool.serving.queue-capacity=256" --modes "CUDA_ASYNC,TWO_LEVEL" \
  --out-dir "$OUT/pool/fp32" > "$OUT/pool/fp32.log" 2>&1; say "pool fp32 rc=$?"; grep '^|' "$OUT/pool/fp32/comparison.md" | tail -3
P=gpupool.memory.budget-reclaim=PERIODIC
timeout 200 bash tools/compare-allocators.sh full --rounds 2 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL+$P,TWO_LEVEL+$P+gpupool.memory.maintenance-interval=100ms,TWO_LEVEL+gpupool.memory.retained-handle-bytes=128MB" \
  --out-dir "$OUT/pool/p99" > "$OUT/pool/p99.log" 2>&1; say "p99 rc=$?"; grep '^|' "$OUT/pool/p99/comparison.md" | tail -5
pk pool
cuda_soak 70
say done
