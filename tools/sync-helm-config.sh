#!/usr/bin/env bash
# config/ is the one source of the deployment profiles. Helm cannot read outside the chart, so the
# chart carries a copy in helm/gpupool/files/config/.
#   tools/sync-helm-config.sh          copy config/*.yml into the chart (run after editing config/)
#   tools/sync-helm-config.sh --check  exit 1 and show the difference when the copy is stale (CI)
set -euo pipefail
cd "$(dirname "$0")/.."
src=config
dst=helm/gpupool/files/config

if [ "${1:-}" = "--check" ]; then
  if diff -r -u "$src" "$dst"; then
    echo "helm/gpupool/files/config matches config/"
  else
    echo "helm/gpupool/files/config differs from config/: run tools/sync-helm-config.sh" >&2
    exit 1
  fi
else
  mkdir -p "$dst"
  rm -f "$dst"/*.yml
  cp "$src"/*.yml "$dst"/
  echo "copied $(ls "$src"/*.yml | wc -l) files from config/ to $dst"
fi
