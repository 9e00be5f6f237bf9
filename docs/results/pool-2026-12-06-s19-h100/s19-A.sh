#!/usr/bin/env bash
# Session 19: the pool's global pair with fewer locked instructions (new.jar, main's working tree) against the bundle (8c520f9),
# on the GPU host's processor; its primitive costs; AllocBench with the new classes; the CUDA backend's GPU tests on them.
set -uo pipefail
W=$(mktemp -d); tar -C "$W" -xJf dist/gpupool-gpu-bundle.tar.xz
B=$W/gpupool-gpu-bundle
J="$B/runtime/bin/java"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/device.txt"
grep -m1 "model name" /proc/cpuinfo | tee -a "$OUT/device.txt"
cat /sys/devices/system/clocksource/clocksource0/current_clocksource >> "$OUT/device.txt"
timeout 60 "$J" -cp probe-tmp/classes CostProbe 2>&1 | tee "$OUT/costprobe.txt"
OLD="$B/app/gpupool.jar:$B/test-classes:$B/lib/*"
NEW="$PWD/probe-tmp/new.jar:$OLD"
JOPTS=(--enable-native-access=ALL-UNNAMED)
for rep in 1 2; do
  for v in new old; do
    if [ $v = new ]; then CP=$NEW; else CP=$OLD; fi
    for m in global-only two-level; do
      timeout 60 "$J" "${JOPTS[@]}" -cp "$CP" io.gpupool.lab.PairCpuBench --modes $m --sizes 512,65536,2097152,67108864 \
        --lag 20000 --lazy-fences true --rounds 15 --round-ms 100 --json "$OUT/pair-$v-$m-$rep.json" 2>&1 | tee "$OUT/pair-$v-$m-$rep.txt"
    done
  done
done
echo "== AllocBench new"; timeout 150 "$J" "${JOPTS[@]}" -cp "$NEW" io.gpupool.backend.cuda.AllocBench "$OUT/alloc-new.json" 100 > "$OUT/alloc-new.log" 2>&1; echo "rc=$?"
tail -5 "$OUT/alloc-new.log"
echo "== GPU tests (CudaBackendGpuTest) on new classes"
timeout 150 "$J" "${JOPTS[@]}" -XX:+EnableDynamicAgentLoading -cp "$B/tools/junit-platform-console-standalone.jar:$NEW" \
  org.junit.platform.console.ConsoleLauncher execute --disable-banner --disable-ansi-colors --details=summary \
  --include-engine=junit-jupiter --include-tag=gpu --select-class=io.gpupool.backend.cuda.CudaBackendGpuTest \
  --reports-dir="$OUT/gpu-tests" > "$OUT/gpu-tests.log" 2>&1; echo "rc=$?"; tail -15 "$OUT/gpu-tests.log"
rm -rf "$W"
