#!/usr/bin/env bash
# Deployment checks that need no Docker engine: YAML lint, Dockerfile lint, Helm chart checks.
# Called by .ci/run; runnable by hand (after tools/ci/install-tools.sh, with Debian's yamllint).
set -euo pipefail
cd "$(dirname "$0")/../.."

echo "== yamllint (config profiles, chart values, CI scenarios)"
yamllint --strict .yamllint.yml config helm/gpupool/Chart.yaml helm/gpupool/values.yaml helm/gpupool/ci \
  helm/gpupool/files/config helm/gpupool/files/prometheus tools/ci/alert-rules-test.yaml
echo "yamllint: no problems"

echo "== Dockerfile lint (dockerfile-utils)"
node tools/ci/lint-dockerfile.mjs Dockerfile

echo "== shell scripts parse"
for s in tools/ci/*.sh tools/sync-helm-config.sh tools/monitoring-live-check.sh docker/*.sh .ci/run; do bash -n "$s"; done

tools/ci/helm-checks.sh
