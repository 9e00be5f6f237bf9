#!/usr/bin/env bash
# Session 9's last device call (< 5 min): three more rounds of the BF16 default workload, cuda-async against the server's
# defaults (lazy fences on), so the memory and p99 medians of call A rest on six rounds, not three.
set -uo pipefail
TAG=s9D
source "$(dirname "$0")/call-lib.sh"
mkdir -p "$OUT/pool"
timeout 290 bash tools/compare-allocators.sh full --rounds 3 --warmup 3s --duration 8s --drain 3s --server-args "$BF16" \
  --modes "CUDA_ASYNC,TWO_LEVEL" --out-dir "$OUT/pool/bf16" > "$OUT/pool/compare.log" 2>&1
say "pool rc=$?"; grep '^|' "$OUT/pool/bf16/comparison.md" | tail -3
pk pool
say done
