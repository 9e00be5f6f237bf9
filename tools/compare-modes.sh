#!/usr/bin/env bash
# The same load against the same build, one allocator mode at a time (issue 8's comparison, quick
# mode on the host backend). For each mode: start the server on loopback, wait until ready, run the
# load driver, stop the server. Results: target/compare/<mode>.json and .html, and a summary table.
#
#   tools/compare-modes.sh                                  # 20 s per mode, TWO_LEVEL GLOBAL_ONLY BEST_FIT DIRECT
#   DURATION=60s MODES="TWO_LEVEL DIRECT" tools/compare-modes.sh --concurrency 16
#   BACKEND=cuda MODES="TWO_LEVEL GLOBAL_ONLY BEST_FIT DIRECT CUDA_ASYNC" tools/compare-modes.sh
#   SERVER_ARGS="--gpupool.serving.streams-per-device=8" tools/compare-modes.sh
#
# Extra arguments go to the load driver (io.gpupool.load.LoadDriver).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${JAVA_HOME:-}" ]; then export JAVA_HOME=/usr/lib/jvm/temurin-25-jdk-amd64; fi
PORT=${PORT:-28417}
MPORT=${MPORT:-28418}
DURATION=${DURATION:-20s}
BACKEND=${BACKEND:-host}
MODES=${MODES:-"TWO_LEVEL GLOBAL_ONLY BEST_FIT DIRECT"}
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  ./mvnw -B -o -q test-compile dependency:build-classpath -Dmdep.outputFile=target/cp.txt -Dmdep.includeScope=test
fi
CP="target/test-classes:target/classes:$(cat target/cp.txt)"
mkdir -p target/compare
summary=target/compare/summary.txt
: > "$summary"
for mode in $MODES; do
  log=target/compare/$mode-server.log
  "$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED -cp "$CP" io.gpupool.GpuPoolApplication \
      --gpupool.backend="$BACKEND" --gpupool.memory.mode="$mode" \
      --server.port="$PORT" --management.server.port="$MPORT" ${SERVER_ARGS:-} > "$log" 2>&1 &
  server=$!
  ready=0
  for _ in $(seq 1 60); do
    sleep 2
    if ! kill -0 "$server" 2>/dev/null; then break; fi
    if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/v2/health/ready")" = 200 ]; then ready=1; break; fi
  done
  if [ "$ready" != 1 ]; then
    echo "$mode: server did not become ready (see $log)" | tee -a "$summary"
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    continue
  fi
  line=$("$JAVA_HOME/bin/java" -cp "$CP" io.gpupool.load.LoadDriver --url "http://127.0.0.1:$PORT" \
      --actuator "http://127.0.0.1:$MPORT" --duration "$DURATION" \
      --out "target/compare/$mode.json" --html "target/compare/$mode.html" "$@" 2>/dev/null | tail -1)
  echo "$mode: $line" | tee -a "$summary"
  kill "$server"
  wait "$server" 2>/dev/null || true
done
echo "summary: $summary"
