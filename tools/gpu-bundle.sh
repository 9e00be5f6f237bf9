#!/usr/bin/env bash
# Builds dist/gpupool-gpu-bundle.tar.xz: everything needed to run the GPU test suite (tests tagged
# "gpu") and GPU benchmarks on a CUDA host that has neither a JDK nor Maven.
#
#   gpupool-gpu-bundle/
#     runtime/          jlink'd JDK 25 (only the modules the server and its tests use)
#     app/gpupool.jar   the application classes (plain jar; dependencies are in lib/)
#     test-classes/     compiled tests and test resources (PTX for the test kernels)
#     lib/              runtime and test dependency jars (JUnit itself comes from tools/)
#     tools/            junit-platform-console-standalone.jar
#     run-gpu-tests.sh  runs the gpu-tagged tests or a given main class
#     compare-allocators.sh, loaddriver.sh, load-env.sh, models/   load driver and allocator comparison
#
# Usage: tools/gpu-bundle.sh            (JAVA_HOME must be a JDK 25; network only for the JUnit launcher
#                                        if it is not yet in ~/.m2)
set -euo pipefail
cd "$(dirname "$0")/.."

export JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
JUNIT_VERSION=${JUNIT_VERSION:-6.0.3}   # the JUnit Platform version Spring Boot 4.0.x manages
MAX_BYTES=$((60 * 1024 * 1024))
MODULES=java.base,java.logging,java.xml,java.scripting,jdk.unsupported,java.desktop,jdk.crypto.ec,java.management,java.naming,java.net.http,jdk.management,java.sql,java.instrument,jdk.jfr,java.compiler,java.security.jgss,jdk.zipfs,jdk.attach,java.rmi,jdk.net
XZ_LEVEL=${XZ_LEVEL:-6}               # -6 gives ~52 MiB; lower is faster and larger
NAME=gpupool-gpu-bundle
STAGE=target/gpu-bundle/$NAME

# Offline first (the usual warm ~/.m2), online when something is missing.
mvnw() { ./mvnw -B -q -o "$@" || ./mvnw -B -q "$@"; }

rm -rf target/gpu-bundle
mkdir -p "$STAGE"/{app,lib,tools} dist

echo "[bundle] compiling and packaging (tests compiled, not run)"
mvnw -DskipTests package
cp target/gpupool-*.jar.original "$STAGE/app/gpupool.jar" 2>/dev/null \
  || cp "$(ls target/gpupool-*.jar | grep -v -- '-sources' | head -1)" "$STAGE/app/gpupool.jar"
cp -r target/test-classes "$STAGE/test-classes"
# ArchUnit does not travel (below), so neither do the tests written with it.
grep -rlZ --include='*.class' 'com/tngtech/archunit' "$STAGE/test-classes" | xargs -0 -r rm -f

echo "[bundle] copying dependency jars"
# JUnit comes from the console launcher; the Docker/Testcontainers stack and the JMH annotation
# processor are of no use on a GPU host (tests tagged docker need a Docker engine) and would double the size; the
# architecture rules (ArchUnit) are checked by the build, not by the GPU suite.
mvnw dependency:copy-dependencies -DincludeScope=test -DoutputDirectory="$STAGE/lib" \
  -DexcludeGroupIds=org.junit.platform,org.junit.jupiter,org.junit.vintage,org.testcontainers,com.github.docker-java,net.java.dev.jna,com.tngtech.archunit \
  -DexcludeArtifactIds=jmh-generator-annprocess,commons-compress,duct-tape,testcontainers,testcontainers-junit-jupiter

echo "[bundle] fetching the JUnit console launcher $JUNIT_VERSION"
ARTIFACT=org.junit.platform:junit-platform-console-standalone:$JUNIT_VERSION
mvnw dependency:copy -Dartifact=$ARTIFACT -DoutputDirectory="$STAGE/tools" -Dmdep.stripVersion=true

echo "[bundle] linking the Java runtime"
"$JAVA_HOME/bin/jlink" --add-modules "$MODULES" --output "$STAGE/runtime" \
  --compress=zip-0 --strip-debug --no-header-files --no-man-pages

cp tools/run-gpu-tests.sh "$STAGE/run-gpu-tests.sh"
chmod +x "$STAGE/run-gpu-tests.sh"
# The load driver and the allocator comparison (docs/benchmarks.md) with the example models they serve.
cp tools/load-env.sh tools/loaddriver.sh tools/compare-allocators.sh tools/soak.sh tools/batching-bench.sh "$STAGE/"
cp -r models "$STAGE/models"

echo "[bundle] re-storing jars uncompressed so that xz compresses across classes"
python3 - "$STAGE/lib" "$STAGE/tools" <<'PY'
import os, sys, zipfile
for folder in sys.argv[1:]:
    for name in os.listdir(folder):
        if not name.endswith(".jar"):
            continue
        path = os.path.join(folder, name)
        stored = path + ".stored"
        # The tokenizers jar carries its native library for four platforms; the GPU machine needs one.
        foreign = name.startswith("tokenizers-")
        # JCuda's natives carry its PTX compiler and NVRTC bindings too; NVRTC goes through FFM (CUDA 13) and the PTX
        # compiler is never used, so only the driver and runtime bindings travel.
        jcuda = name.startswith("jcuda-natives-")
        with zipfile.ZipFile(path) as src, zipfile.ZipFile(stored, "w", zipfile.ZIP_STORED) as dst:
            for info in src.infolist():
                if foreign and info.filename.startswith("native/lib/") and info.filename.count("/") > 2 \
                        and not info.filename.startswith("native/lib/linux-x86_64/"):
                    continue
                if jcuda and ("JNvPTXCompiler" in info.filename or "JNvrtc" in info.filename):
                    continue
                data = src.read(info.filename)
                info.compress_type = zipfile.ZIP_STORED
                dst.writestr(info, data)
        os.replace(stored, path)
PY

echo "[bundle] compressing"
tar -C target/gpu-bundle -cf - "$NAME" | xz -T0 -"$XZ_LEVEL" > "dist/$NAME.tar.xz"
SIZE=$(stat -c %s "dist/$NAME.tar.xz")
echo "[bundle] dist/$NAME.tar.xz: $((SIZE / 1024 / 1024)) MiB"
if [ "$SIZE" -ge "$MAX_BYTES" ]; then
  echo "[bundle] ERROR: the bundle is over 60 MiB" >&2
  exit 1
fi
