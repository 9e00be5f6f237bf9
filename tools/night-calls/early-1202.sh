#!/usr/bin/env bash
# 2026-12-02 early validation call (one device call, < 9 min): the helpers' GPU checks on main with
# gemm-tune, alloc-fast and batch-fast merged. Each stage's output goes into its own tarball under OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: $0 OUT}
export BUNDLE=dist/gpupool-gpu-bundle.tar.xz
W=$(mktemp -d)
echo "[early] $(date -u +%T) gemm"
timeout 178 bash tools/gemm-gpu-check.sh "$W/gemm" tests gemm bert > "$W/gemm.log" 2>&1; echo "gemm rc=$?" >> "$W/gemm.log"
mv "$W/gemm.log" "$W/gemm/" 2>/dev/null; tar -C "$W" -czf "$OUT/gemm.tgz" gemm
echo "[early] $(date -u +%T) alloc"
mkdir -p "$W/alloc" && B=$(mktemp -d) && tar -C "$B" -xJf "$BUNDLE" \
  && timeout 110 "$B/gpupool-gpu-bundle/run-gpu-tests.sh" --main io.gpupool.backend.cuda.AllocBench "$W/alloc/alloc-bench.json" 150 > "$W/alloc/alloc.log" 2>&1
echo "alloc rc=$?" >> "$W/alloc/alloc.log"; nproc >> "$W/alloc/alloc.log"; uptime >> "$W/alloc/alloc.log"; rm -rf "$B"
tar -C "$W" -czf "$OUT/alloc.tgz" alloc
echo "[early] $(date -u +%T) batching"
mkdir -p "$W/batch-fast/jfr"
PACKED_BF16=1 SHORT_VARIANTS="gpupool.serving.streams-per-device=2,gpupool.batching.max-queue-delay=1ms" timeout 175 \
  bash tools/batching-bench.sh "$W/batch-fast" short --warmup 6s --duration 10s --drain 3s \
  --jvm-opts "-Xmx8g -XX:StartFlightRecording=filename=$W/batch-fast/jfr/server-%p.jfr,settings=profile,dumponexit=true" \
  > "$W/batch-fast/bench.log" 2>&1; echo "batching-bench rc=$?" >> "$W/batch-fast/bench.log"
tar -C "$W/batch-fast" -czf "$OUT/batch-jfr.tgz" jfr; rm -rf "$W/batch-fast/jfr"
tar -C "$W" -czf "$OUT/batch-fast.tgz" batch-fast
echo "[early] $(date -u +%T) done"; ls -la "$OUT"
