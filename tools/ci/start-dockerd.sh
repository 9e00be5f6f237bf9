#!/usr/bin/env bash
# Makes sure a Docker engine answers on the default socket, starting one if needed.
#
# The engine is started the way the "docker" tests expect it on CI machines:
#   - HTTP(S)_PROXY point at a closed local port, so no image is ever pulled from a registry
#     (every image the tests use is built locally from a debootstrap root file system);
#   - --bridge=none and no iptables rules, so containers share the host network and never route
#     off the machine;
#   - no systemd here: dockerd runs in the background, its log in $DOCKERD_LOG.
# Exits 0 when `docker info` answers, non-zero (with the log tail) when the engine cannot start.
set -euo pipefail

DOCKERD_LOG=${DOCKERD_LOG:-/var/log/gpupool-dockerd.log}
# Written only when this script starts the engine, so that the caller can stop exactly that one.
DOCKERD_PIDFILE=${DOCKERD_PIDFILE:-/var/run/gpupool-dockerd.pid}

if docker info >/dev/null 2>&1; then
  echo "docker engine already running: $(docker info --format '{{.ServerVersion}} ({{.Driver}})')"
  exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
  echo "dockerd not found: install Debian's docker.io first" >&2
  exit 1
fi

# An engine killed without cleaning up (e.g. at the end of an earlier session) leaves pid files
# behind; dockerd refuses to start while such a pid belongs to a live process of another program.
for stale in /var/run/docker.pid /var/run/docker/containerd/containerd.pid; do
  if [ -s "$stale" ]; then
    pid=$(cat "$stale")
    comm=$(cat "/proc/$pid/comm" 2>/dev/null || true)
    case "$comm" in
      dockerd|containerd) ;;
      *) echo "removing stale $stale (pid $pid is ${comm:-gone})"; rm -f "$stale" ;;
    esac
  fi
done

echo "starting dockerd (log: $DOCKERD_LOG)"
HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 NO_PROXY= \
  nohup dockerd --bridge=none --iptables=false --ip6tables=false \
  >"$DOCKERD_LOG" 2>&1 </dev/null &
echo $! >"$DOCKERD_PIDFILE"
echo "dockerd pid $(cat "$DOCKERD_PIDFILE")"

for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then
    echo "docker engine up: $(docker info --format '{{.ServerVersion}} ({{.Driver}})')"
    exit 0
  fi
  sleep 1
done
echo "dockerd did not answer within 60 s; last log lines:" >&2
tail -n 30 "$DOCKERD_LOG" >&2 || true
exit 1
