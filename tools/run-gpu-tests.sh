#!/usr/bin/env bash
# Runs inside an unpacked gpupool GPU bundle (see tools/gpu-bundle.sh).
#
#   ./run-gpu-tests.sh [REPORTS_DIR]        run every test tagged "gpu"; JUnit XML goes to REPORTS_DIR
#                                           (default ./reports); the last line is "N passed, N failed, N skipped"
#   ./run-gpu-tests.sh --main CLASS ARGS..  run a main class (e.g. a benchmark) on the bundle's class path
#
# JAVA_OPTS adds JVM options. Exit status: 0 when no test failed (skips are not failures).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
JAVA="$HERE/runtime/bin/java"
CP="$HERE/app/gpupool.jar:$HERE/test-classes:$HERE/lib/*"
# shellcheck disable=SC2206
JOPTS=(--enable-native-access=ALL-UNNAMED -XX:+EnableDynamicAgentLoading ${JAVA_OPTS:-})

if [ "${1:-}" = "--main" ]; then
  shift
  exec "$JAVA" "${JOPTS[@]}" -cp "$CP" "$@"
fi

REPORTS=${1:-$HERE/reports}
mkdir -p "$REPORTS"
"$JAVA" "${JOPTS[@]}" -cp "$HERE/tools/junit-platform-console-standalone.jar:$CP" \
  org.junit.platform.console.ConsoleLauncher execute \
  --disable-banner --disable-ansi-colors --details=tree --include-engine=junit-jupiter --include-tag=gpu \
  --scan-class-path="$HERE/test-classes" --reports-dir="$REPORTS"
STATUS=$?

XML=$(ls "$REPORTS"/TEST-*.xml 2>/dev/null | head -1)
if [ -z "$XML" ]; then
  echo "0 passed, 1 failed (no JUnit report was written; launcher exit status $STATUS)"
  exit 1
fi
attr() { grep -o "<testsuite [^>]*" "$XML" | head -1 | grep -o " $1=\"[0-9]*\"" | grep -o '[0-9]*'; }
TESTS=$(attr tests); FAILURES=$(attr failures); ERRORS=$(attr errors); SKIPPED=$(attr skipped)
FAILED=$((FAILURES + ERRORS))
echo "$((TESTS - FAILED - SKIPPED)) passed, $FAILED failed, $SKIPPED skipped"
[ "$FAILED" -eq 0 ] && [ "$STATUS" -eq 0 ]
