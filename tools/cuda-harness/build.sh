#!/usr/bin/env bash
# Builds the standalone kernel harness: tools/cuda-harness/build.sh [output] (default target/cuda-harness/harness).
# x86-64 binary, static CUDA runtime; at run time it needs only the NVIDIA driver and the PTX directory.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-target/cuda-harness/harness}"
mkdir -p "$(dirname "$out")"
nvcc -O2 -std=c++17 -arch=sm_80 -cudart=static -o "$out" tools/cuda-harness/harness.cu
echo "built $out"
