#!/bin/bash
# gpupool-healthcheck [HOST [PORT [PATH]]]
# Exits 0 when GET http://HOST:PORT/PATH answers 200, 1 otherwise (within ~5 s).
# Defaults: 127.0.0.1, $MANAGEMENT_SERVER_PORT (the port Spring binds the actuator to; 8081),
# /actuator/health/readiness: the image's HEALTHCHECK. The Helm test pod calls it with the
# Service name, the app port and /v2/health/ready.
# Plain bash (/dev/tcp), because neither the Temurin JRE image nor the minimal test base ships curl.
set -u
host=${1:-127.0.0.1}
port=${2:-${MANAGEMENT_SERVER_PORT:-8081}}
path=${3:-/actuator/health/readiness}
exec 3<>"/dev/tcp/$host/$port" || { echo "cannot connect to $host:$port" >&2; exit 1; }
printf 'GET %s HTTP/1.0\r\nHost: %s\r\nConnection: close\r\n\r\n' "$path" "$host" >&3
IFS=' ' read -r -t 5 _ status _ <&3 || { echo "no answer from $host:$port$path" >&2; exit 1; }
echo "GET $host:$port$path -> $status"
[ "$status" = 200 ]
