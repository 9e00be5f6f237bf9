# What the time-boxed GPU checks share (tools/gemm-gpu-check.sh, tools/ops-gpu-check.sh), so that each check
# states only its steps. A check parses OUT_DIR and STEPS itself (its usage and default steps are its own), then
# sources this file from the repository root:
#
#   gpu_check_start TAG FIELDS     BUNDLE (default dist/gpupool-gpu-bundle.tar.xz, from tools/gpu-bundle.sh);
#                                  OUT_DIR created; SUMMARY=OUT_DIR/summary.txt; WORK, a temporary folder removed
#                                  on exit; STATUS=0; then says the GPU's nvidia-smi FIELDS
#   say TEXT...                    one line "[TAG +Ns] TEXT" on stdout and into SUMMARY
#   has STEP                       whether STEP is among STEPS
#   gpu_check_unpack               the bundle into WORK: B (its root), JAVA (its java, native access allowed),
#                                  CP (the application, the test classes and the jars); exits 1 where it cannot
#   gpu_check_tests SECONDS LOG REPORTS CLASS...
#                                  the gpu-tagged tests of each CLASS on the JUnit console launcher within SECONDS
#                                  -> LOG, REPORTS/TEST-*.xml; STATUS=1 unless they pass; says the counts and adds
#                                  the failures to SUMMARY

gpu_check_start() {
  GPU_CHECK_TAG=$1
  BUNDLE=${BUNDLE:-dist/gpupool-gpu-bundle.tar.xz}
  mkdir -p "$OUT_DIR"
  SUMMARY="$OUT_DIR/summary.txt"
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/$GPU_CHECK_TAG.XXXXXX")
  trap 'rm -rf "$WORK"' EXIT
  STATUS=0
  say "GPU: $(nvidia-smi --query-gpu="$2" --format=csv,noheader 2>/dev/null || echo none)"
}

say() { echo "[$GPU_CHECK_TAG +${SECONDS}s] $*" | tee -a "$SUMMARY"; }
has() { [[ " $STEPS " == *" $1 "* ]]; }

gpu_check_unpack() {
  tar -C "$WORK" -xJf "$BUNDLE" || { say "cannot unpack $BUNDLE"; exit 1; }
  B="$WORK/gpupool-gpu-bundle"
  JAVA=("$B/runtime/bin/java" --enable-native-access=ALL-UNNAMED -XX:+EnableDynamicAgentLoading)
  CP="$B/app/gpupool.jar:$B/test-classes:$B/lib/*"
  say "bundle unpacked"
}

gpu_check_tests() {
  local seconds=$1 log=$2 reports=$3 class selections=()
  shift 3
  for class in "$@"; do
    selections+=(--select-class="$class")
  done
  timeout "$seconds" "${JAVA[@]}" -cp "$B/tools/junit-platform-console-standalone.jar:$CP" \
    org.junit.platform.console.ConsoleLauncher execute --disable-banner --disable-ansi-colors --details=tree \
    --include-engine=junit-jupiter --include-tag=gpu \
    "${selections[@]}" \
    --reports-dir="$reports" > "$log" 2>&1
  local rc=$?
  [ "$rc" -eq 0 ] || STATUS=1
  say "gpu tests rc=$rc: $(grep -E 'tests (successful|failed|aborted)' "$log" | tr -s ' ' | tr '\n' ' ')"
  grep -E '✘' -A2 "$log" | head -40 >> "$SUMMARY"
}
