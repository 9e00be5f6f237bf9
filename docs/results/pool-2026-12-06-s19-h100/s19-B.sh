#!/usr/bin/env bash
# Session 19, call B: old (bundle, 8c520f9) against new (probe-tmp/new.jar), interleaved on one host; AllocBench both;
# the BF16 default workload with the new classes in the server; the GPU suite on them. One tarball per stage in OUT.
set -uo pipefail
W=$(mktemp -d); tar -C "$W" -xJf dist/gpupool-gpu-bundle.tar.xz
B=$W/gpupool-gpu-bundle
J="$B/runtime/bin/java"
{ nvidia-smi --query-gpu=name --format=csv,noheader; grep -m1 "model name" /proc/cpuinfo; } | tee "$OUT/device.txt"
OLD="$B/app/gpupool.jar:$B/test-classes:$B/lib/*"
NEW="$PWD/probe-tmp/new.jar:$OLD"
JOPTS=(--enable-native-access=ALL-UNNAMED)
R=$(mktemp -d)/pairs; mkdir -p "$R"
for rep in 1 2; do
  for v in old new; do
    if [ $v = new ]; then CP=$NEW; else CP=$OLD; fi
    timeout 60 "$J" "${JOPTS[@]}" -cp "$CP" io.gpupool.lab.PairCpuBench --modes global-only --sizes 512,65536,2097152,67108864 \
      --lag 20000 --lazy-fences true --rounds 15 --round-ms 100 --json "$R/pair-$v-$rep.json" 2>&1 | sed "s/^/$v $rep /" | tee -a "$R/pairs.txt"
  done
done
tar -C "$R/.." -czf "$OUT/pairs.tgz" pairs
A=$(dirname "$R")/alloc; mkdir -p "$A"
for v in new old; do
  if [ $v = new ]; then CP=$NEW; else CP=$OLD; fi
  echo "== AllocBench $v"; timeout 100 "$J" "${JOPTS[@]}" -cp "$CP" io.gpupool.backend.cuda.AllocBench "$A/alloc-$v.json" 100 > "$A/alloc-$v.log" 2>&1; echo "rc=$?"
  tar -C "$A/.." -czf "$OUT/alloc.tgz" alloc
done
echo "== BF16 default workload, new classes in the server"
sed -i "s|SERVER_CP=\"\$ROOT/app/gpupool.jar|SERVER_CP=\"$PWD/probe-tmp/new.jar:\$ROOT/app/gpupool.jar|" "$B/load-env.sh"
grep -c "new.jar" "$B/load-env.sh"
F=$(dirname "$R")/bf16
timeout 300 bash "$B/compare-allocators.sh" full --rounds 3 --warmup 3s --duration 8s --drain 3s \
  --server-args "--gpupool.kernels.precision=BF16 --gpupool.serving.queue-capacity=256" --modes "CUDA_ASYNC,TWO_LEVEL" \
  --out-dir "$F" > "$F.log" 2>&1; echo "bf16 rc=$?"; grep '^|' "$F/comparison.md" | tail -4
find "$F" -name '*.html' -delete; cp "$F.log" "$F/"; tar -C "$F/.." -czf "$OUT/bf16.tgz" bf16
echo "== GPU suite on new classes"
G=$(dirname "$R")/gpu
timeout 100 "$J" "${JOPTS[@]}" -XX:+EnableDynamicAgentLoading -cp "$B/tools/junit-platform-console-standalone.jar:$NEW" \
  org.junit.platform.console.ConsoleLauncher execute --disable-banner --disable-ansi-colors --details=summary \
  --include-engine=junit-jupiter --include-tag=gpu --scan-class-path="$B/test-classes" \
  --reports-dir="$G" > "$G.log" 2>&1; echo "rc=$?"; tail -16 "$G.log"; cp "$G.log" "$G/" 2>/dev/null; tar -C "$G/.." -czf "$OUT/gpu.tgz" gpu
rm -rf "$W"
