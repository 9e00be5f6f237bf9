#!/usr/bin/env bash
# Session 19, call C: AllocBench again, old first then new (order reversed from call B), for the 16-stream point.
set -uo pipefail
W=$(mktemp -d); tar -C "$W" -xJf dist/gpupool-gpu-bundle.tar.xz
B=$W/gpupool-gpu-bundle; J="$B/runtime/bin/java"
OLD="$B/app/gpupool.jar:$B/test-classes:$B/lib/*"; NEW="$PWD/probe-tmp/new.jar:$OLD"
nvidia-smi --query-gpu=name --format=csv,noheader
for v in old new; do
  if [ $v = new ]; then CP=$NEW; else CP=$OLD; fi
  timeout 75 "$J" --enable-native-access=ALL-UNNAMED -cp "$CP" io.gpupool.backend.cuda.AllocBench "$OUT/alloc-$v.json" 60 > "$OUT/alloc-$v.log" 2>&1; echo "$v rc=$?"
  grep -E "^pool +1[6]? streams|^pool-repeat +16" "$OUT/alloc-$v.log"
done
rm -rf "$W"
