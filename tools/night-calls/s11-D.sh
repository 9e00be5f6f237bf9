#!/usr/bin/env bash
# Session 11's short last call: AllocBench on the server's new defaults (8 MiB mapped extents; its pairs keep one
# block live, so they measure the bookkeeping, not the driver). From the repository root with the bundle carried.
set -uo pipefail
TAG=s11D
source "$(dirname "$0")/call-lib.sh"
say "alloc"; alloc_bench 100 150; say "alloc rc=$?"
grep -E '^(pool|pool-global-only|pool-global-only-lazy-fences|fence|host-pool|host-pool-global-only|streams|scaling) ' "$OUT/alloc/alloc.log" | head -30; tail -5 "$OUT/alloc/alloc.log"; pk alloc
say done
