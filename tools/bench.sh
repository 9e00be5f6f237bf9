#!/usr/bin/env bash
# Runs the allocator JMH benchmarks (src/test/java/io/gpupool/lab) and writes a JSON summary.
#
#   tools/bench.sh                      # the allocator benchmarks (PairBench, ThroughputBench) -> target/jmh.json
#   tools/bench.sh PairBench            # only the single-thread pairs
#   tools/bench.sh '.*'                 # every benchmark in io.gpupool.lab (HostGemmBench too)
#   tools/bench.sh ThroughputBench -p allocator=two-level   # extra JMH options pass through
#
# Short runs by design (1 fork, 2 x 1 s warm-up, 3 x 1 s measurement; set in the annotations).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${JAVA_HOME:-}" ]; then export JAVA_HOME=/usr/lib/jvm/temurin-25-jdk-amd64; fi
./mvnw -B -o -q test-compile dependency:build-classpath -Dmdep.outputFile=target/cp.txt -Dmdep.includeScope=test
pattern="io.gpupool.lab.${1:-(PairBench|ThroughputBench)}"
[ $# -gt 0 ] && shift
"$JAVA_HOME/bin/java" -cp "target/test-classes:target/classes:$(cat target/cp.txt)" \
  org.openjdk.jmh.Main -rf json -rff target/jmh.json "$pattern" "$@"
"$JAVA_HOME/bin/java" -cp "target/test-classes:$(cat target/cp.txt)" io.gpupool.lab.JmhSummary target/jmh.json target/jmh-summary.json
echo "JSON: target/jmh.json (raw JMH), target/jmh-summary.json (one line per benchmark)"
