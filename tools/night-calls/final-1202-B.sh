#!/usr/bin/env bash
# 2026-12-02 final call B (< 10 min): short requests with batching on against off, and BERT-base against torch eager
# and torch.compile (bf16 and fp32), our forward eager and with graphs. Knobs: SHORT_VARIANTS, BERT_S (220).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: $0 OUT}
export BUNDLE=$PWD/dist/gpupool-gpu-bundle.tar.xz
S=$SECONDS
say() { echo "[finalB +$((SECONDS-S))s] $*"; }
pk() { find "$OUT/$1" -name '*.html' -delete; tar -C "$OUT" -czf "$OUT/$1.tgz" "$1" && rm -rf "$OUT/$1"; }
say "batching"; mkdir -p "$OUT/batching"
SHORT_VARIANTS=${SHORT_VARIANTS-gpupool.serving.request-arena=true} timeout 150 bash tools/batching-bench.sh "$OUT/batching" short --warmup 5s --duration 10s --drain 2s \
  > "$OUT/batching/bench.log" 2>&1; say "batching rc=$?"
grep '^\[load\].*req/s' "$OUT/batching/bench.log" | cut -c1-160; cat "$OUT/batching/batching.md" 2>/dev/null; pk batching
say "bert"; mkdir -p "$OUT/bert"
TOTAL_S=${BERT_S:-220} GPUPOOL_S=60 timeout $(( ${BERT_S:-220} + 15 )) bash tools/bert-vs-torch.sh "$OUT/bert" > "$OUT/bert/run.log" 2>&1
say "bert rc=$?"; cat "$OUT"/bert/bert-vs-torch.md 2>/dev/null | head -40; pk bert
say done
