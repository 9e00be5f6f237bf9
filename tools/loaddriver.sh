#!/usr/bin/env bash
# KServe v2 load driver against a server on loopback (io.gpupool.load.LoadDriver; options in its class comment).
#
#   tools/loaddriver.sh --model tiny-bert --concurrency 8 --duration 30s
#   tools/loaddriver.sh --model tiny-bert --rate 200 --duration 1m --out target/load-rate.json --html target/load-rate.html
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${JAVA_HOME:-}" ]; then export JAVA_HOME=/usr/lib/jvm/temurin-25-jdk-amd64; fi
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  ./mvnw -B -o -q test-compile dependency:build-classpath -Dmdep.outputFile=target/cp.txt -Dmdep.includeScope=test
fi
exec "$JAVA_HOME/bin/java" -cp "target/test-classes:target/classes:$(cat target/cp.txt)" io.gpupool.load.LoadDriver "$@"
