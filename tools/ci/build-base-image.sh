#!/usr/bin/env bash
# Builds the local stand-in for the public Temurin 25 JRE image, so that the "docker" tests never
# pull anything: a minimal Debian root file system (debootstrap --variant=minbase) plus a jlink'd
# Java 25 runtime at /opt/java/openjdk (where the Temurin images keep theirs), imported with
# `docker import`.
#
# The image is tagged twice:
#   $BASE_REPO:<key>   key = hash of this script and the JDK's release file: a rerun with the same
#                      inputs finds the tag and skips the build (debootstrap takes minutes);
#   $BASE_REPO:latest  what the tests use (GpuPool's ContainerImageIT reads -Dgpupool.test.base-image).
#
# Usage: tools/ci/build-base-image.sh            (needs root, debootstrap, a running Docker engine)
# Env:   JDK_HOME (default /usr/lib/jvm/temurin-25-jdk-amd64), DEBIAN_SUITE (default bookworm),
#        DEBIAN_MIRROR (default: the first deb.debian.org-style URI in apt's sources), BASE_REPO.
set -euo pipefail

JDK_HOME=${JDK_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
DEBIAN_SUITE=${DEBIAN_SUITE:-bookworm}
BASE_REPO=${BASE_REPO:-gpupool-ci/jre25}
if [ -z "${DEBIAN_MIRROR:-}" ]; then
  DEBIAN_MIRROR=$(grep -rhoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
    | grep -oE 'https?://[^ ]+' | head -n1 || true)
  DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
fi

# Modules of the runtime: what a Spring Boot WebFlux + Actuator + JMX/JFR server needs, nothing
# for development (no javac, no jshell). The real base image (a full JRE) has a superset of these,
# so an app that starts on this runtime starts on the real one.
MODULES=java.base,java.compiler,java.desktop,java.instrument,java.logging,java.management,\
java.management.rmi,java.naming,java.net.http,java.prefs,java.rmi,java.scripting,java.security.jgss,\
java.security.sasl,java.sql,java.transaction.xa,java.xml,java.xml.crypto,jdk.crypto.cryptoki,jdk.jfr,\
jdk.management,jdk.management.agent,jdk.naming.dns,jdk.net,jdk.unsupported,jdk.zipfs

key=$( { cat "$0"; cat "$JDK_HOME/release"; echo "$DEBIAN_SUITE $MODULES"; } | sha256sum | cut -c1-12)
tag="$BASE_REPO:$key"

if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "base image $tag already built; skipping"
  docker tag "$tag" "$BASE_REPO:latest"
  exit 0
fi

work=$(mktemp -d /var/tmp/gpupool-base.XXXXXX)
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"

echo "debootstrap $DEBIAN_SUITE (minbase) from $DEBIAN_MIRROR"
debootstrap --variant=minbase "$DEBIAN_SUITE" "$rootfs" "$DEBIAN_MIRROR" >"$work/debootstrap.log" 2>&1 || {
  tail -n 40 "$work/debootstrap.log" >&2
  exit 1
}
# Trim what a runtime image never reads.
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
  "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/var/log/*.log

echo "jlink runtime from $JDK_HOME"
"$JDK_HOME/bin/jlink" --add-modules "$MODULES" --strip-debug --no-man-pages --no-header-files \
  --compress=zip-6 --output "$rootfs/opt/java/openjdk"
"$rootfs/opt/java/openjdk/bin/java" -version

echo "docker import -> $tag"
tar -C "$rootfs" -c . | docker import \
  --change 'ENV JAVA_HOME=/opt/java/openjdk' \
  --change 'ENV PATH=/opt/java/openjdk/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["/bin/bash"]' \
  --message "gpupool CI base: debian $DEBIAN_SUITE minbase + jlink'd JDK 25 runtime" \
  - "$tag"
docker tag "$tag" "$BASE_REPO:latest"
docker image ls "$BASE_REPO"
