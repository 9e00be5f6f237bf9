# gpupool container image.
#
#   docker build -t gpupool .                                  # build from source (needs Maven Central)
#   docker build --build-arg APP_JAR=target/gpupool-0.1.0-SNAPSHOT.jar -t gpupool .
#                                                              # package a jar built beforehand (offline)
#
# Stages:
#   build    BUILD_IMAGE (a JDK 25). Either runs the Maven wrapper on the sources in the context, or,
#            when APP_JAR names a jar in the context, takes that jar as is. Then extracts the Spring Boot
#            jar into its layers (dependencies change rarely, the application often) as a plain
#            app.jar + lib/, which the JVM's ahead-of-time cache can serve (a nested jar cannot).
#   runtime  BASE_IMAGE (a JRE 25). Non-root user 10001, config profiles in /config, model repository
#            volume at /models, app port 8080, management (actuator) port 8081, the AOT cache
#            /app/app.aot trained at build time.
#
# BASE_IMAGE and BUILD_IMAGE default to the public Temurin images; the "docker" tests substitute a
# locally built Debian + jlink'd runtime for both (tools/ci/build-base-image.sh), with APP_JAR set to
# the jar of the running Maven build, so that the test builds this very file without a network.
# Both stages only use instructions the classic builder understands (no RUN --mount), because the
# tests build through the Docker API.
ARG BASE_IMAGE=eclipse-temurin:25-jre
ARG BUILD_IMAGE=eclipse-temurin:25-jdk

FROM ${BUILD_IMAGE} AS build
WORKDIR /workspace
# Path (relative to the context) of an already built Spring Boot jar; empty: build from source.
ARG APP_JAR=
COPY . .
RUN set -eu; \
    if [ -n "$APP_JAR" ]; then \
      test -f "$APP_JAR" || { echo "APP_JAR=$APP_JAR is not in the build context" >&2; exit 1; }; \
      cp "$APP_JAR" app.jar; \
    else \
      rm -rf target; \
      ./mvnw -B -ntp -DskipTests package; \
      cp target/gpupool-*.jar app.jar; \
    fi; \
    java -Djarmode=tools -jar app.jar extract --layers --application-filename app.jar --destination extracted

FROM ${BASE_IMAGE} AS runtime
RUN groupadd --system --gid 10001 gpupool \
 && useradd --system --uid 10001 --gid gpupool --home-dir /app --no-create-home \
      --shell /usr/sbin/nologin gpupool \
 && mkdir -p /app /config /models \
 && chown gpupool:gpupool /models
WORKDIR /app
# Least-often-changed layer first: lib/*.jar, then app.jar (whose manifest names them).
COPY --from=build /workspace/extracted/dependencies/ ./
COPY --from=build /workspace/extracted/snapshot-dependencies/ ./
COPY --from=build /workspace/extracted/application/ ./
COPY config/ /config/
COPY docker/healthcheck.sh /usr/local/bin/gpupool-healthcheck
# spring.config.additional-location: config/application*.yml of the repository, overriding the jar's.
# SPRING_PROFILES_ACTIVE: production plus a backend profile (host or cuda); gpupool.backend=auto
# already picks CUDA when a driver and device are visible.
# JDK_JAVA_OPTIONS: JVM flags operators may replace (heap, GC); the java launcher reads it.
ENV SPRING_CONFIG_ADDITIONAL_LOCATION=optional:file:/config/ \
    SPRING_PROFILES_ACTIVE=production \
    GPUPOOL_MODELS_PATH=/models \
    JDK_JAVA_OPTIONS="-XX:MaxRAMPercentage=75.0"
# Java's ahead-of-time cache (JEP 483/514/515): a training run refreshes the application context once
# (spring.context.exit=onRefresh: beans created, no port opened) and records the classes it loaded and
# linked, so that the server starts from /app/app.aot instead of loading them from the jars. The run
# uses the host profile without production (which needs the operator password); the cache depends
# only on the class path and the JVM, both the same as the ENTRYPOINT's. A JVM that cannot use the
# cache warns once and starts without it. Start-up times: docs/benchmarks.md, "Start-up".
RUN SPRING_PROFILES_ACTIVE=host java --enable-native-access=ALL-UNNAMED -XX:AOTCacheOutput=/app/app.aot \
      -Dspring.context.exit=onRefresh -jar /app/app.jar \
 && chmod 0444 /app/app.aot
USER 10001:10001
EXPOSE 8080 8081
VOLUME ["/models"]
HEALTHCHECK --interval=15s --timeout=5s --start-period=90s --retries=3 \
  CMD ["/usr/local/bin/gpupool-healthcheck"]
ENTRYPOINT ["java", "--enable-native-access=ALL-UNNAMED", "-XX:+ExitOnOutOfMemoryError", "-XX:AOTCache=/app/app.aot", \
            "-jar", "/app/app.jar"]
