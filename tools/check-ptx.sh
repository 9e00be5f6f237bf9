#!/usr/bin/env bash
# Checks that the committed PTX matches the CUDA sources: regenerates it into a temporary directory with
# tools/build-ptx.sh and diffs. Exit 0 when equal, 1 on a difference, 0 with a notice when nvcc is absent
# (CI machines without the CUDA toolkit skip the check).
#
# The PTX header names the nvcc release that wrote it; a different release may emit different (equally
# valid) PTX, so a difference is reported together with both releases.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvcc >/dev/null 2>&1; then
  echo "check-ptx: nvcc not found, skipping the PTX check"
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
tools/build-ptx.sh "$tmp" >/dev/null

status=0
for source in src/main/cuda/*.cu; do
  name="$(basename "${source%.cu}")"
  committed="src/main/resources/ptx/$name.ptx"
  if [ ! -f "$committed" ]; then
    echo "check-ptx: $committed is missing (run tools/build-ptx.sh)"; status=1; continue
  fi
  # nvcc 13.0 does not always emit the same PTX for one source: attention.cu compiles to a second register
  # numbering in about one run of six. A source passes when one of five compilations matches the commit.
  for attempt in 2 3 4 5; do
    diff -q "$committed" "$tmp/$name.ptx" >/dev/null && break
    tools/build-ptx.sh "$tmp" "$name.cu" >/dev/null
  done
  if ! diff -q "$committed" "$tmp/$name.ptx" >/dev/null; then
    echo "check-ptx: $committed differs from what $source compiles to (run tools/build-ptx.sh)"
    echo "  committed by: $(grep -m1 'Cuda compilation tools' "$committed" || echo unknown)"
    echo "  this nvcc:    $(grep -m1 'Cuda compilation tools' "$tmp/$name.ptx" || echo unknown)"
    diff "$committed" "$tmp/$name.ptx" | head -20
    status=1
  fi
done
for committed in src/main/resources/ptx/*.ptx; do
  [ -e "$committed" ] || continue
  name="$(basename "${committed%.ptx}")"
  if [ ! -f "src/main/cuda/$name.cu" ]; then
    echo "check-ptx: $committed has no source src/main/cuda/$name.cu"; status=1
  fi
done
[ "$status" -eq 0 ] && echo "check-ptx: committed PTX matches the sources"
exit "$status"
