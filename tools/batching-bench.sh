#!/usr/bin/env bash
# Dynamic batching on against off, on the GPU machine (issue 16's two targets in one call): the same server build
# per workload with gpupool.batching.enabled=false and =true (the generated BERT-base has no dynamic_batching field
# of its own, so the server default decides), CUDA, BF16, through tools/compare-allocators.sh full (it unpacks the
# bundle when no JDK is here and generates the BERT-base).
#
#   tools/batching-bench.sh OUT [both|short|long] [more compare-allocators / LoadDriver options]
#     short: 64 clients, batch 1-4, sequences 1-64 (log-normal, median 24), 1 round      -> OUT/short/
#            target: batching on >= 4x the req/s of off, at a p99 no worse
#     long:   8 clients, batch 32 x 512, 2 rounds (the order turns; ratios within a round) -> OUT/long/
#            target: batching on no more than 3 % slower than off (req/s ratio >= 0.97)
#   -> OUT/batching.json (and .md): per workload both variants' req/s and p99, the ratios, whether the target
#      holds, and the batcher's own figures from /actuator/gpupool after the run (executions, mean requests
#      per execution, bypassed requests, queue delay).
#   PACKED_BF16=1: the short workload also runs batching on with gpupool.kernels.packed-bf16=true (bf16 batches
#      packed, not padded), reported as short.packed_bf16 against off.
#   SHORT_VARIANTS="a=1+b=2,c=3": the short workload also runs batching on with each variant's settings added
#      (settings joined by +, variants by commas), each reported in short.variants against off.
#
# Each run: a server start (~5-60 s with the BERT-base warm-up) + 5 s warm-up + 15 s measured + 5 s drain; both
# workloads: 6 runs, about 4-7 minutes. Later options override these (e.g. --duration 20s).
set -euo pipefail
OUT=${1:?usage: $0 OUT [both|short|long] [options]}
WHICH=${2:-both}
shift $(( $# >= 2 ? 2 : 1 ))
case "$WHICH" in
  both|short|long) ;;
  *) echo "usage: $0 OUT [both|short|long] [options]" >&2; exit 2 ;;
esac
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
MODES=TWO_LEVEL+gpupool.batching.enabled=false,TWO_LEVEL+gpupool.batching.enabled=true
SERVER="--gpupool.serving.queue-capacity=256 --gpupool.kernels.precision=BF16"
COMMON=(--server-args "$SERVER" --warmup 5s --duration 15s --drain 5s)

PACKED=TWO_LEVEL+gpupool.batching.enabled=true+gpupool.kernels.packed-bf16=true
SHORT_MODES=$MODES
[ "${PACKED_BF16:-0}" = 1 ] && SHORT_MODES=$SHORT_MODES,$PACKED
if [ -n "${SHORT_VARIANTS:-}" ]; then
  IFS=, read -ra VARIANTS <<< "$SHORT_VARIANTS"
  for variant in "${VARIANTS[@]}"; do
    SHORT_MODES=$SHORT_MODES,TWO_LEVEL+gpupool.batching.enabled=true+$variant
  done
fi

STATUS=0
if [ "$WHICH" = short ] || [ "$WHICH" = both ]; then
  "$HERE/compare-allocators.sh" full "${COMMON[@]}" --modes "$SHORT_MODES" --concurrency 64 --batch-min 1 --batch-max 4 \
    --seq-min 1 --seq-median 24 --seq-sigma 0.6 --seq-max 64 --out-dir "$OUT/short" "$@" || STATUS=$?
fi
if [ "$WHICH" = long ] || [ "$WHICH" = both ]; then
  "$HERE/compare-allocators.sh" full "${COMMON[@]}" --modes "$MODES" --rounds 2 --concurrency 8 --batch-min 32 --batch-max 32 \
    --seq-min 512 --seq-median 512 --seq-max 512 --out-dir "$OUT/long" "$@" || STATUS=$?
fi

if ! command -v python3 >/dev/null; then
  echo "[batching-bench] no python3: no OUT/batching.json; the raw figures are in OUT/*/comparison.json" >&2
  exit $STATUS
fi
python3 - "$OUT" <<'PY'
import json, os, statistics, sys
from datetime import datetime, timezone

out = sys.argv[1]
OFF, ON = "TWO_LEVEL+gpupool.batching.enabled=false", "TWO_LEVEL+gpupool.batching.enabled=true"
PACKED = ON + "+gpupool.kernels.packed-bf16=true"
targets = {
    "short": {"text": "on >= 4x the req/s of off, at a p99 no worse", "min_ratio": 4.0, "p99_no_worse": True},
    "long": {"text": "on no more than 3 % slower than off: req/s ratio >= 0.97", "min_ratio": 0.97, "p99_no_worse": False},
}

def batcher(folder, row):
    """The batching section the load driver read from /actuator/gpupool after the run, if any."""
    path = os.path.join(folder, row["file"] + ".json")
    try:
        section = json.load(open(path)).get("pool_after", {}).get("batching", {})
    except (OSError, ValueError):
        return None
    return {model: {k: m.get(k) for k in ("layout", "executions", "requests", "meanRequestsPerExecution", "meanRowsPerExecution", "phases",
                                          "meanTokensPerExecution", "bypassed", "splitsForMemory", "queueDelay")}
            for model, m in section.items()} or None

summary = {"tool": "tools/batching-bench.sh", "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}
lines = ["| workload | batching off req/s | on req/s | on / off | off p99 ms | on p99 ms | target | met |",
         "|---|---:|---:|---:|---:|---:|---|---|"]
for workload, target in targets.items():
    folder = os.path.join(out, workload)
    try:
        comparison = json.load(open(os.path.join(folder, "comparison.json")))
    except (OSError, ValueError):
        continue
    rounds = {}
    for row in comparison.get("modes", []):
        if "throughput_rps" in row:
            rounds.setdefault(row.get("round", 1), {})[row["mode"]] = row
    pairs = [r for r in rounds.values() if OFF in r and ON in r and r[OFF]["throughput_rps"] > 0]
    if not pairs:
        summary[workload] = {"error": "no round with both variants measured; see " + folder}
        continue
    ratios = [r[ON]["throughput_rps"] / r[OFF]["throughput_rps"] for r in pairs]
    p99_ratios = [r[ON]["p99_ms"] / r[OFF]["p99_ms"] for r in pairs if r[OFF]["p99_ms"] > 0]
    ratio = statistics.median(ratios)
    p99_ratio = statistics.median(p99_ratios) if p99_ratios else None
    met = ratio >= target["min_ratio"] and (not target["p99_no_worse"] or (p99_ratio is not None and p99_ratio <= 1.0))
    median = lambda mode, field: statistics.median(r[mode][field] for r in pairs)
    summary[workload] = {
        "target": target["text"], "met": met, "rounds": len(pairs),
        "throughput_ratio_on_off": round(ratio, 3), "throughput_ratios_per_round": [round(x, 3) for x in ratios],
        "p99_ratio_on_off": None if p99_ratio is None else round(p99_ratio, 3),
        "off": {"throughput_rps": median(OFF, "throughput_rps"), "p99_ms": median(OFF, "p99_ms"),
                "not_200": sum(r[OFF]["requests"] - r[OFF]["ok"] for r in pairs)},
        "on": {"throughput_rps": median(ON, "throughput_rps"), "p99_ms": median(ON, "p99_ms"),
               "not_200": sum(r[ON]["requests"] - r[ON]["ok"] for r in pairs),
               "batcher": batcher(folder, pairs[-1][ON])},
    }
    packed = [r for r in pairs if PACKED in r]
    if packed:
        packed_ratio = statistics.median(r[PACKED]["throughput_rps"] / r[OFF]["throughput_rps"] for r in packed)
        summary[workload]["packed_bf16"] = {
            "throughput_rps": statistics.median(r[PACKED]["throughput_rps"] for r in packed),
            "p99_ms": statistics.median(r[PACKED]["p99_ms"] for r in packed),
            "throughput_ratio_vs_off": round(packed_ratio, 3),
            "not_200": sum(r[PACKED]["requests"] - r[PACKED]["ok"] for r in packed),
            "unexpected_5xx": sum(r[PACKED].get("unexpected_5xx", 0) for r in packed),
            "batcher": batcher(folder, packed[-1][PACKED])}
    variants = sorted({mode for r in pairs for mode in r} - {OFF, ON, PACKED})
    for mode in variants:
        measured = [r for r in pairs if mode in r]
        variant_ratio = statistics.median(r[mode]["throughput_rps"] / r[OFF]["throughput_rps"] for r in measured)
        p99s = [r[mode]["p99_ms"] / r[OFF]["p99_ms"] for r in measured if r[OFF]["p99_ms"] > 0]
        summary[workload].setdefault("variants", {})[mode[len(ON) + 1:]] = {
            "throughput_rps": statistics.median(r[mode]["throughput_rps"] for r in measured),
            "p99_ms": statistics.median(r[mode]["p99_ms"] for r in measured),
            "throughput_ratio_vs_off": round(variant_ratio, 3),
            "p99_ratio_vs_off": round(statistics.median(p99s), 3) if p99s else None,
            "not_200": sum(r[mode]["requests"] - r[mode]["ok"] for r in measured),
            "unexpected_5xx": sum(r[mode].get("unexpected_5xx", 0) for r in measured),
            "batcher": batcher(folder, measured[-1][mode])}
    s = summary[workload]
    lines.append("| %s | %.1f | %.1f | %.3f | %.2f | %.2f | %s | %s |" % (workload, s["off"]["throughput_rps"],
                 s["on"]["throughput_rps"], ratio, s["off"]["p99_ms"], s["on"]["p99_ms"], target["text"],
                 "yes" if met else "**no**"))
    if "packed_bf16" in s:
        p = s["packed_bf16"]
        lines.append("| %s, on with packed-bf16 | | %.1f | %.3f | | %.2f | (same) | %s |" % (workload,
                     p["throughput_rps"], p["throughput_ratio_vs_off"], p["p99_ms"],
                     "yes" if p["throughput_ratio_vs_off"] >= target["min_ratio"] else "**no**"))
    for name, v in s.get("variants", {}).items():
        met_variant = v["throughput_ratio_vs_off"] >= target["min_ratio"] and (
            not target["p99_no_worse"] or (v["p99_ratio_vs_off"] is not None and v["p99_ratio_vs_off"] <= 1.0))
        lines.append("| %s, on + %s | | %.1f | %.3f | | %.2f | (same) | %s |" % (workload, name,
                     v["throughput_rps"], v["throughput_ratio_vs_off"], v["p99_ms"], "yes" if met_variant else "**no**"))
json.dump(summary, open(os.path.join(out, "batching.json"), "w"), indent=2)
open(os.path.join(out, "batching.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
print("[batching-bench] wrote " + os.path.join(out, "batching.json"), file=sys.stderr)
PY
exit $STATUS
