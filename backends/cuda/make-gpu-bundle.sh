#!/usr/bin/env bash
# Builds backends/cuda/gpu-bundle/ and its archive gpu-bundle.tar.gz: everything the GPU test
# (gpu-test.sh) needs on a machine that has an NVIDIA driver and nothing else (no JDK, no Maven):
#   runtime/   a jlink-ed Java 25 runtime (the modules jdeps finds the jars need)
#   lib/       the backend's jars (backplane-spi, backplane-backend-cuda), the core it is served by
#              (backplane-core, backplane-protocol and their dependencies, backplane-testkit for the
#              ModelHarness), the REST and gRPC frontends (the CUDA shared-memory step), the
#              module's test classes (GpuSelfTest, CudaIpcClient), slf4j-simple
#   models/    the sample model saxpy_cuda (config.pbtxt, saxpy.ptx)
#   gpu-test.sh, cupy_reference.py
# Then it rehearses the bundle here: GpuSelfTest --fake-driver in the bundle's own runtime and jars
# (every step over the tests' in-memory driver), and fails when that fails.
# The archive must stay under 64 MiB, the most a device run carries; the folder itself is larger
# (the runtime is stored uncompressed so that gzip packs it better than jlink's zip would).
# Run it from anywhere, on a machine with JDK 25 (./mvnw finds it). Both are ignored by git.
set -euo pipefail
module=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$module/../.." && pwd)
bundle="$module/gpu-bundle"
# shellcheck source=../../tools/find-jdk.sh
. "$root/tools/find-jdk.sh"
jdk=$(find_jdk jlink) || { echo "make-gpu-bundle: no JDK 25 with jlink found; set BACKPLANE_JDK to one" >&2; exit 2; }
slf4j=$(sed -n 's:.*<slf4j.version>\(.*\)</slf4j.version>.*:\1:p' "$root/pom.xml")

rm -rf "$bundle"
mkdir -p "$bundle/lib" "$bundle/models"
cd "$root"
# GpuSelfTest serves the model through the real core (BackplaneHost), so the bundle carries the
# core and the testkit besides the backend; the backend itself still depends on the SPI alone.
# copy-dependencies runs in every reactor module: the union of their runtime dependencies.
./mvnw -q -B -pl backends/cuda -am package dependency:copy-dependencies -DskipTests -DincludeScope=runtime \
  -DexcludeGroupIds=io.backplane,org.junit.jupiter,org.junit.platform,org.opentest4j,org.apiguardian -DoutputDirectory="$bundle/lib"
cp "$root"/spi/target/backplane-spi-*.jar "$root"/protocol/target/backplane-protocol-*.jar "$root"/core/target/backplane-core-*.jar \
  "$root"/testkit/target/backplane-testkit-*.jar \
  "$root"/plugins/frontend-http/target/backplane-plugin-frontend-http-*.jar "$root"/plugins/frontend-grpc/target/backplane-plugin-frontend-grpc-*.jar \
  "$module"/target/backplane-backend-cuda-*.jar "$bundle/lib/"
rm -f "$bundle"/lib/*-tests.jar "$bundle"/lib/*-sources.jar "$bundle"/lib/*-javadoc.jar
"$jdk/bin/jar" --create --file "$bundle/lib/backplane-backend-cuda-gpu-self-test.jar" -C "$module/target/test-classes" .
./mvnw -q -B -N dependency:copy -Dartifact="org.slf4j:slf4j-simple:$slf4j" -DoutputDirectory="$bundle/lib"

modules=$("$jdk/bin/jdeps" --multi-release 25 --ignore-missing-deps --print-module-deps "$bundle"/lib/*.jar 2>/dev/null | tail -n1)
echo "make-gpu-bundle: jdeps says the jars need: $modules"
# java.desktop (jackson-databind's optional java.beans) and java.compiler (error-prone's annotations)
# are never loaded on these paths; leaving them out keeps the archive well under 64 MiB. The
# rehearsal below runs REST and gRPC in this runtime, so a class that needs them would fail it.
modules=$(echo "$modules" | tr , '\n' | grep -v -x -e java.desktop -e java.compiler | paste -sd, -)
echo "make-gpu-bundle: the runtime holds: $modules"
"$jdk/bin/jlink" --add-modules "$modules" --strip-debug --no-man-pages --no-header-files --compress=zip-0 \
  --output "$bundle/runtime"

cp -r "$root/samples/gpu-models/saxpy_cuda" "$bundle/models/"
cp "$module/gpu-test.sh" "$module/cupy_reference.py" "$bundle/"
chmod +x "$bundle/gpu-test.sh"

echo "make-gpu-bundle: rehearsing the bundle over the in-memory driver (GpuSelfTest --fake-driver)"
if ! "$bundle/runtime/bin/java" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow -Xmx1g \
    -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -Dorg.slf4j.simpleLogger.logFile=System.out \
    -Dorg.slf4j.simpleLogger.log.io.backplane.core.internal.ModelRegistry=off \
    -cp "$bundle/lib/*" io.backplane.backend.cuda.GpuSelfTest --fake-driver --quick --model-dir "$bundle/models/saxpy_cuda"; then
  echo "make-gpu-bundle: the rehearsal failed: the bundle would fail on the GPU machine too" >&2
  exit 1
fi

archive="$module/gpu-bundle.tar.gz"
tar -C "$module" -czf "$archive" gpu-bundle
size=$(( $(stat -c %s "$archive") / 1048576 ))
echo "make-gpu-bundle: $archive is ${size} MiB ($(du -sm "$bundle" | cut -f1) MiB unpacked)"
if [ "$size" -ge 64 ]; then
  echo "make-gpu-bundle: the archive is over 64 MiB, more than a device run carries" >&2
  exit 1
fi
