#!/usr/bin/env bash
# Runs the same workload against the same build once per allocator mode (gpupool.memory.mode), one
# server process after the other on free loopback ports, and writes comparison.{json,md,html} plus one
# report and one server log per mode (io.gpupool.lab.AllocatorComparison).
#
#   tools/compare-allocators.sh quick [OPTIONS]   host backend, TWO_LEVEL GLOBAL_ONLY BEST_FIT DIRECT,
#                                                 tiny-bert + iris-mlp, 4 s warm-up + 15 s per mode
#                                                 -> target/compare/quick/
#   tools/compare-allocators.sh full [OPTIONS]    on the GPU machine, from a checkout with the bundle
#                                                 dist/gpupool-gpu-bundle.tar.xz (tools/gpu-bundle.sh; unpacked
#                                                 to a scratch folder, no JDK or Maven needed) or from inside
#                                                 the unpacked bundle: CUDA backend,
#                                                 the four modes + CUDA_ASYNC, 8 s warm-up + 25 s per mode,
#                                                 a BERT-base-sized model (random weights, generated with
#                                                 python3 + transformers when available; else tiny-bert)
#                                                 -> compare-full/ in the bundle (or --out-dir; --pack FILE.tgz)
#
# OPTIONS are AllocatorComparison's (--modes, --out-dir, --backend, --models, --server-args "...",
# --jvm-opts "...", --startup-timeout, --rounds N: every mode N times, the order turning each round, ratios
# within each round and a median / lowest / highest summary; one full run moves by ~0.5 % on the H200;
# a --modes entry may be a variant with server settings: TWO_LEVEL+gpupool.memory.mapped-slack=0.25, or
# JVM system properties: TWO_LEVEL+-Dname=value) and LoadDriver's (--concurrency, --rate, --duration, --mix, ...;
# see tools/loaddriver.sh --help); later options override the preset. --pack FILE.tgz archives the output folder.
# Works from a checkout (compiles first; SKIP_BUILD=1 skips) and from inside the GPU bundle (no Maven, no JDK).
set -euo pipefail
PRESET=${1:-}
case "$PRESET" in
  quick|full) shift ;;
  *) echo "usage: $0 quick|full [OPTIONS]   (see the header of this script)" >&2; exit 2 ;;
esac
SELF_DIR=$(cd "$(dirname "$0")" && pwd)
# In a checkout without a JDK (the GPU machine): run the copy inside the bundle built by tools/gpu-bundle.sh.
if [ ! -x "$SELF_DIR/runtime/bin/java" ] && [ ! -x "${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}/bin/java" ]; then
  BUNDLE=${BUNDLE:-$SELF_DIR/../dist/gpupool-gpu-bundle.tar.xz}
  if [ ! -f "$BUNDLE" ]; then
    echo "[compare] no JDK here and no bundle at $BUNDLE (build it with tools/gpu-bundle.sh)" >&2
    exit 2
  fi
  SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/gpupool-compare.XXXXXX")
  echo "[compare] unpacking $BUNDLE into $SCRATCH" >&2
  tar -xJf "$BUNDLE" -C "$SCRATCH"
  exec "$SCRATCH/gpupool-gpu-bundle/compare-allocators.sh" "$PRESET" "$@"
fi
# shellcheck source=tools/load-env.sh
source "$SELF_DIR/load-env.sh"
cd "$ROOT"

PACK=""
ARGS=()
while [ $# -gt 0 ]; do
  if [ "$1" = "--pack" ]; then PACK=$2; shift 2; else ARGS+=("$1"); shift; fi
done

if [ "$PRESET" = quick ]; then
  OUT=target/compare/quick
  PRESET_ARGS=(--backend host --modes TWO_LEVEL,GLOBAL_ONLY,BEST_FIT,DIRECT --models "$MODELS"
    --mix bert=3,mlp=1 --concurrency 4 --warmup 4s --duration 15s --drain 10s
    --jvm-opts "-Xmx768m" --quiet)
else
  OUT=$ROOT/compare-full
  MODEL_DIR=$MODELS
  BERT=(--bert-model tiny-bert --batch-max 8 --seq-median 24 --seq-max 64)
  GEN=${TMPDIR:-/tmp}/gpupool-bench-models
  if python3 -c 'import torch, transformers' 2>/dev/null; then
    echo "[compare] generating bert-base (random weights, seed 0) into $GEN" >&2
    rm -rf "$GEN" && mkdir -p "$GEN" && cp -r "$MODELS/iris-mlp" "$GEN/"
    python3 - "$GEN/bert-base" <<'PY'
import json, sys, torch
from transformers import BertConfig, BertModel
torch.manual_seed(0)
out = sys.argv[1]
BertModel(BertConfig(), add_pooling_layer=True).eval().save_pretrained(out)  # safetensors
config = json.load(open(out + "/config.json"))
config["gpupool"] = {"max_batch_size": 32, "max_sequence_length": 512, "outputs": ["pooler_output"]}
json.dump(config, open(out + "/config.json", "w"), indent=2)
PY
    MODEL_DIR=$GEN
    BERT=(--bert-model bert-base --batch-max 32 --seq-median 96 --seq-sigma 0.7 --seq-max 512)
  else
    echo "[compare] python3 with torch and transformers not found: using tiny-bert" >&2
  fi
  PRESET_ARGS=(--backend cuda --modes TWO_LEVEL,GLOBAL_ONLY,BEST_FIT,DIRECT,CUDA_ASYNC --models "$MODEL_DIR"
    "${BERT[@]}" --mix bert=1 --concurrency 16 --warmup 8s --duration 25s --drain 15s --timeout 30s
    --startup-timeout 120s --jvm-opts "-Xmx8g" --server-args "--gpupool.serving.queue-capacity=256" --quiet)
fi

HAS_OUT=0
for a in "${ARGS[@]}"; do [ "$a" = "--out-dir" ] && HAS_OUT=1; done
[ $HAS_OUT = 0 ] && PRESET_ARGS+=(--out-dir "$OUT")

set +e
"$JAVA" --enable-native-access=ALL-UNNAMED ${LOAD_JAVA_OPTS:-} -cp "$TOOL_CP" io.gpupool.lab.AllocatorComparison \
  --java "$JAVA" --server-cp "$SERVER_CP" "${PRESET_ARGS[@]}" "${ARGS[@]}"
STATUS=$?
set -e
if [ -n "$PACK" ]; then
  DIR=$OUT
  for ((i = 0; i < ${#ARGS[@]}; i++)); do [ "${ARGS[$i]}" = "--out-dir" ] && DIR=${ARGS[$((i + 1))]}; done
  tar czf "$PACK" -C "$DIR" . && echo "[compare] packed $DIR into $PACK" >&2
fi
exit $STATUS
