#!/usr/bin/env bash
# Session 12's only call (about 85 s of device time were left): the CUDA fault soak with the operator trims of
# tools/soak.sh (every 250 ms on 2 MiB extents), which sessions 9 and 11 ran without trims. From the repository
# root with the bundle carried.
set -uo pipefail
TAG=s12A
source "$(dirname "$0")/call-lib.sh"
say "soak"; mkdir -p "$OUT/soak"
timeout 70 bash tools/soak.sh --backend cuda --duration 20s --concurrency 16 \
  --modes "TWO_LEVEL+gpupool.kernels.precision=BF16" --out-dir "$OUT/soak/run" > "$OUT/soak/soak.log" 2>&1
say "soak rc=$?"; grep -E "^\[load\]|faults|maps|recover" "$OUT/soak/soak.log" | head -8; tail -4 "$OUT/soak/soak.log"; pk soak
say done
