#!/usr/bin/env bash
# Stages the kernel harness for a GPU machine that has no nvcc: builds it, copies it with the committed PTX and
# the benchmark scripts into a folder (default .device/cudakernels, git-ignored), and writes run.sh there.
#
#   tools/cuda-harness/stage.sh [folder]
#   then on the GPU machine:  bash <folder>/run.sh <results-dir>
#
# run.sh runs the harness (checks + GEMM/attention timings -> harness.json), prints the summary table, and
# runs tools/bench_bert_torch.py (PyTorch eager BERT-base fp32/bf16 and cuBLAS linear timings -> torch.json).
set -euo pipefail
cd "$(dirname "$0")/../.."
dest="${1:-.device/cudakernels}"
mkdir -p "$dest"
tools/cuda-harness/build.sh "$dest/harness" >/dev/null
rm -rf "$dest/ptx"
cp -r src/main/resources/ptx "$dest/ptx"
cp tools/cuda-harness/summarize.py tools/bench_bert_torch.py "$dest/"
cat > "$dest/run.sh" <<'RUN'
#!/usr/bin/env bash
# Usage: run.sh <results-dir>
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:?results directory}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$out/smi.txt" 2>&1
"$here/harness" "$here/ptx" "$out/harness.json" > "$out/harness.log" 2>&1
echo "harness exit status $?"
python3 "$here/summarize.py" "$out/harness.json"
PYTHONUNBUFFERED=1 python3 "$here/bench_bert_torch.py" --gemm --out "$out/torch.json" > /dev/null 2> "$out/torch.log"
echo "torch benchmark exit status $?"
RUN
chmod +x "$dest/run.sh"
echo "staged in $dest: run it there with  bash $dest/run.sh \$OUT"
