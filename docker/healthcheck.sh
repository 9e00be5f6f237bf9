#!/bin/bash
# Docker HEALTHCHECK: healthy when the readiness group answers 200 on the management port.
# Plain bash (/dev/tcp), because neither the Temurin JRE image nor the minimal test base ships curl.
set -u
port=${MANAGEMENT_PORT:-8081}
exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
printf 'GET /actuator/health/readiness HTTP/1.0\r\nHost: localhost\r\nConnection: close\r\n\r\n' >&3
IFS=' ' read -r -t 4 _ status _ <&3 || exit 1
[ "$status" = 200 ]
