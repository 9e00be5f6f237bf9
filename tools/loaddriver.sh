#!/usr/bin/env bash
# Drives a running gpupool server on this machine with variable-size v2 infer requests and writes a
# JSON report and an HTML page (io.gpupool.lab.LoadDriver; all options: tools/loaddriver.sh --help).
#
#   tools/loaddriver.sh                                 # 20 s, 8 clients, tiny-bert, -> target/load/load.{json,html}
#   tools/loaddriver.sh --mix bert=3,mlp=1 --rate 200 --duration 60s --out target/load/rate200.json
#   tools/loaddriver.sh --malformed 0.1 --cancel 0.05 --check # fault/soak traffic; exit 1 on a broken expectation
#
# Works from a checkout (compiles with ./mvnw first; SKIP_BUILD=1 skips) and from inside the GPU bundle.
set -euo pipefail
# shellcheck source=tools/load-env.sh
source "$(dirname "$0")/load-env.sh"
cd "$ROOT"
exec "$JAVA" ${LOAD_JAVA_OPTS:-} -cp "$TOOL_CP" io.gpupool.lab.LoadDriver "$@"
