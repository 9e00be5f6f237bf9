# Sourced by a device call script (not run): from the repository root, OUT from the first argument, the carried
# bundle, and the helpers every stage uses. Set TAG before sourcing; it prefixes the log lines.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=${1:?usage: $0 OUT}
export BUNDLE=$PWD/dist/gpupool-gpu-bundle.tar.xz
S=$SECONDS
BF16="--gpupool.kernels.precision=BF16 --gpupool.serving.queue-capacity=256"
say() { echo "[${TAG:-call} +$((SECONDS-S))s] $*"; }
# packs a stage's folder under OUT into its own tarball (the dashboards' HTML left out)
pk() { find "$OUT/$1" -name '*.html' -delete; tar -C "$OUT" -czf "$OUT/$1.tgz" "$1" && rm -rf "$OUT/$1"; }
# a cap of FRACTION x the median peak reserved bytes of CUDA_ASYNC in a compare-allocators comparison.json
cuda_async_cap() {
  python3 - "$1" "$2" <<'PY'
import json, statistics, sys
d = json.load(open(sys.argv[1]))
rows = [m for m in d["modes"] if m["mode"] == "CUDA_ASYNC"]
print(int(float(sys.argv[2]) * statistics.median(r["pool_peak_reserved_bytes"] for r in rows)))
PY
}
# a list setting as indexed properties: indexed PROP V1 V2 ... -> +PROP[0]=V1+PROP[1]=V2... (compare-allocators variants
# split at commas, so a list cannot be written as PROP=V1,V2)
indexed() { local prop=$1 i=0 v; shift; for v in "$@"; do printf '+%s[%d]=%s' "$prop" $i "$v"; i=$((i+1)); done; }
# AllocBench from the carried bundle into OUT/alloc: alloc_bench ROUND_MS TIMEOUT_S (the log in OUT/alloc/alloc.log)
alloc_bench() {
  local w; w=$(mktemp -d); mkdir -p "$OUT/alloc"
  tar -C "$w" -xJf "$BUNDLE" && timeout "$2" "$w/gpupool-gpu-bundle/run-gpu-tests.sh" --main io.gpupool.backend.cuda.AllocBench \
    "$OUT/alloc/alloc-bench.json" "$1" > "$OUT/alloc/alloc.log" 2>&1
  local rc=$?; rm -rf "$w"; return $rc
}
# issue 15's short-request workload, as LoadDriver options: batch 1-4, sequences 1-128 (median 24), 32 clients
SHORT=(--concurrency 32 --batch-min 1 --batch-max 4 --seq-min 1 --seq-median 24 --seq-sigma 0.6 --seq-max 128)
# the GPU suite into OUT/suite, its failures named, packed: gpu_suite TIMEOUT_S
gpu_suite() {
  say "suite"; timeout "$1" bash tools/gpu-suite.sh "$OUT/suite" tests > /dev/null 2>&1; say "suite rc=$?"
  tail -3 "$OUT/suite/gpu-suite.log"; grep -o 'testcase name="[^"]*" classname="[^"]*"[^>]*>\s*<failure' "$OUT/suite/gpu-tests.xml" | head
  pk suite
}
# the GEMM and ops checks into OUT/checks, packed: gpu_checks
gpu_checks() {
  say "checks"; mkdir -p "$OUT/checks"
  timeout 60 bash tools/gemm-gpu-check.sh "$OUT/checks/gemm" tests > "$OUT/checks/gemm.log" 2>&1; say "gemm-check rc=$?"
  timeout 90 bash tools/ops-gpu-check.sh "$OUT/checks/ops" tests > "$OUT/checks/ops.log" 2>&1; say "ops-check rc=$?"
  tail -2 "$OUT/checks/gemm.log" "$OUT/checks/ops.log"; pk checks
}
# the CUDA fault soak (30 s, 16 clients, BF16, plus SETTINGS as +name=value...) into OUT/soak, packed: cuda_soak TIMEOUT_S [SETTINGS]
cuda_soak() {
  say "soak"; mkdir -p "$OUT/soak"
  timeout "$1" bash tools/soak.sh --backend cuda --duration 30s --concurrency 16 \
    --modes "TWO_LEVEL+gpupool.kernels.precision=BF16${2:++$2}" --out-dir "$OUT/soak/run" > "$OUT/soak/soak.log" 2>&1
  say "soak rc=$?"; tail -5 "$OUT/soak/soak.log"; pk soak
}
