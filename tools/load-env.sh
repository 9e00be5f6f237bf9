# Sourced by tools/loaddriver.sh and tools/compare-allocators.sh: finds java and the class paths, in a
# checkout (builds with the Maven wrapper unless SKIP_BUILD=1) or inside the GPU bundle (no Maven,
# no JDK: runtime/bin/java, app/gpupool.jar, test-classes/, lib/, models/).
#
# Sets: JAVA, SERVER_CP (the application), TOOL_CP (the load tools: test classes + application),
#       MODELS (the shipped example models), WHERE (checkout|bundle), ROOT.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -x "$HERE/runtime/bin/java" ] && [ -f "$HERE/app/gpupool.jar" ]; then
  WHERE=bundle
  ROOT=$HERE
  JAVA=$ROOT/runtime/bin/java
  SERVER_CP="$ROOT/app/gpupool.jar:$ROOT/lib/*"
  TOOL_CP="$ROOT/test-classes:$SERVER_CP"
  MODELS=$ROOT/models
else
  WHERE=checkout
  ROOT=$(cd "$HERE/.." && pwd)
  export JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
  JAVA=$JAVA_HOME/bin/java
  if [ "${SKIP_BUILD:-0}" != 1 ] || [ ! -f "$ROOT/target/load-cp.txt" ]; then
    echo "[load] compiling (./mvnw test-compile; SKIP_BUILD=1 skips this)" >&2
    (cd "$ROOT" && ./mvnw -B -o -q test-compile dependency:build-classpath \
        -Dmdep.outputFile=target/load-cp.txt -Dmdep.includeScope=test) >&2 || return 1
  fi
  SERVER_CP="$ROOT/target/classes:$(cat "$ROOT/target/load-cp.txt")"
  TOOL_CP="$ROOT/target/test-classes:$SERVER_CP"
  MODELS=$ROOT/models
fi
