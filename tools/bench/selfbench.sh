#!/usr/bin/env bash
# Builds the bench and runs SelfBench: the same concurrency sweep against an embedded host, the
# REST frontend and the gRPC frontend of one process, on an identity model. Arguments go to
# SelfBench (e.g. --concurrency 1,8,64 --duration-s 10 --warmup-s 3 --elements 16 --instances 2).
set -euo pipefail
cd "$(dirname "$0")/../.."
./mvnw -q -B -o -pl tools/bench -am package dependency:build-classpath -Dmdep.outputFile=target/classpath.txt -DskipTests
# The JDK that ./mvnw picked (25+).
JAVA="$(./mvnw -v | sed -n 's/.*runtime: //p' | head -1)/bin/java"
exec "$JAVA" --sun-misc-unsafe-memory-access=allow -Dlogback.configurationFile=tools/bench/selfbench-logback.xml -XX:+UseParallelGC -Xms1g -Xmx1g --enable-native-access=ALL-UNNAMED \
  -cp "tools/bench/target/classes:$(cat tools/bench/target/classpath.txt)" io.backplane.bench.SelfBench "$@"
