#!/usr/bin/env bash
# Long soak (issue 8): one server (TWO_LEVEL, host backend unless --backend cuda) with 1 % of chunk
# requests failing with injected out-of-memory, driven for DURATION (default 10m) with BERT and MLP
# requests, 10 % malformed requests, 5 % clients hanging up, some binary tensor data. Exit status 1 if
# a 5xx other than 503/504/507 was answered, the pool did not drain to 0 allocated bytes, or the server
# was not ready afterwards. The kernels' per-stream workspaces (cuBLASLt's, on CUDA) are given back once
# the server was idle for 2 s (gpupool.kernels.workspace-release-after-idle), inside the drain window, so
# "0 allocated" holds on CUDA too; a failed drain names what still holds the bytes (workspaces, graphs,
# the rest). An operator trims the pool every 250 ms (DELETE /actuator/gpupool, with the credential in
# GPUPOOL_SECURITY_OPERATOR_PASSWORD, set here when unset), so that it keeps going back to the device for
# memory, where the faults are injected; a trim answered other than 200 fails the run. Mapped extents are
# one 2 MiB unit here: a trim unmaps whole free extents only, and a light load's partly used 8 MiB extents
# (the default) would stay mapped, so the pool would seldom go back to the device. The short version of
# this runs in every build: SoakTest (tag "soak").
#
#   tools/soak.sh                      # 10 minutes -> target/soak/
#   tools/soak.sh --duration 1h --concurrency 16
#
# Options after the first go to tools/compare-allocators.sh (and from there to the load driver).
set -euo pipefail
export GPUPOOL_SECURITY_OPERATOR_PASSWORD=${GPUPOOL_SECURITY_OPERATOR_PASSWORD:-soak-$RANDOM$RANDOM}
exec "$(dirname "$0")/compare-allocators.sh" quick --modes TWO_LEVEL --out-dir target/soak \
  --server-args "--gpupool.memory.fault-injection.probability=0.01 --gpupool.serving.default-timeout=10s --gpupool.kernels.workspace-release-after-idle=2s --gpupool.memory.mapped-extent-bytes=2MB" \
  --mix bert=3,mlp=1 --binary 0.3 --malformed 0.1 --cancel 0.05 --concurrency 8 --duration 10m --warmup 2s \
  --timeout 30s --drain 30s --trim-every 250ms --check "$@"
