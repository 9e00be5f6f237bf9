#!/usr/bin/env bash
# Regenerates the committed PTX (src/main/resources/ptx/<name>.ptx) from src/main/cuda/<name>.cu.
#
# Usage: tools/build-ptx.sh [output-dir [name.cu ...]]   (default: src/main/resources/ptx, every source)
#
# The PTX targets compute_80 (Ampere and newer: A100, H100/H200, ...); the driver compiles it for the GPU at
# module load, so one text serves every such card. nvcc 13 writes PTX ISA 9.0, which needs a CUDA 13 (R580+)
# driver to load.
#
# The output does not depend on the checkout's path: no line info, sources compiled from their own directory by
# relative name, the C locale, and no internal-linkage (static) function that declares __shared__ memory in the
# sources (nvcc names such variables with a hash of the file's absolute path). nvcc 13.0 still emits a second
# register numbering for attention.cu now and then, so tools/check-ptx.sh regenerates into a temporary directory,
# recompiles a source that differs a few times, and diffs against the committed files.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-src/main/resources/ptx}"
shift $(( $# > 0 ? 1 : 0 ))
mkdir -p "$out"
out="$(cd "$out" && pwd)"

if ! command -v nvcc >/dev/null 2>&1; then
  echo "build-ptx: nvcc not found on PATH" >&2
  exit 2
fi
export LC_ALL=C
cd src/main/cuda
sources=("$@")
[ ${#sources[@]} -gt 0 ] || sources=(*.cu)
for source in "${sources[@]}"; do
  name="${source%.cu}"
  nvcc -ptx -arch=compute_80 -O3 -std=c++17 -o "$out/$name.ptx" "$source"
  echo "build-ptx: $out/$name.ptx"
done
