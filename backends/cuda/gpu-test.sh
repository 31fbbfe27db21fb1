#!/usr/bin/env bash
# Runs the cuda backend's GPU tests (io.backplane.backend.cuda.GpuSelfTest) on a machine with an
# NVIDIA GPU and driver, using the bundle from make-gpu-bundle.sh: needs no JDK there. Takes well
# under 10 minutes (each step has its own timeout).
#
#   backends/cuda/gpu-test.sh            # from a checkout that holds backends/cuda/gpu-bundle/
#   gpu-bundle/gpu-test.sh               # or from inside a copied bundle
#
# Steps: (1) the self-test, which serves the sample model through the real core (BackplaneHost):
# correctness against a CPU reference, device memory back to its
# baseline after unload, bandwidth and launch-overhead figures; (2) the fault test, in its own
# process; (3) if CuPy is importable, the same PTX through CuPy for comparison figures.
# Exit status: the self-test's (0 passed, 1 a check failed, 2 no usable CUDA driver or device).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ -x "$here/runtime/bin/java" ]; then bundle=$here; else bundle=$here/gpu-bundle; fi
if [ ! -x "$bundle/runtime/bin/java" ]; then
  echo "gpu-test: no bundle at $bundle; build it with backends/cuda/make-gpu-bundle.sh on a machine with JDK 25" >&2
  exit 3
fi
java=("$bundle/runtime/bin/java" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow -Xmx2g -XX:+UseSerialGC
  -Dorg.slf4j.simpleLogger.defaultLogLevel=info -Dorg.slf4j.simpleLogger.showDateTime=true
  -Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS -Dorg.slf4j.simpleLogger.showThreadName=false
  -Dorg.slf4j.simpleLogger.logFile=System.out
  -cp "$bundle/lib/*" io.backplane.backend.cuda.GpuSelfTest --model-dir "$bundle/models/saxpy_cuda")

echo "== gpu-test: $(date -u +%FT%TZ) on $(hostname)"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv 2>/dev/null \
  || echo "gpu-test: nvidia-smi is missing or failed (the self-test will say what CUDA lacks)"

echo "== self-test"
timeout "${GPU_SELF_TEST_TIMEOUT:-300}" "${java[@]}" "$@"
rc=$?
if [ "$rc" -eq 124 ]; then echo "gpu-test: the self-test timed out" >&2; fi

if [ "$rc" -eq 0 ] || [ "$rc" -eq 1 ]; then
  echo "== fault test (informational, own process)"
  timeout "${GPU_FAULT_TEST_TIMEOUT:-120}" "${java[@]}" --fault-test || echo "gpu-test: fault test exited with $?"
fi

echo "== CuPy comparison"
if command -v python3 >/dev/null && python3 -c 'import cupy' 2>/dev/null; then
  timeout "${GPU_CUPY_TIMEOUT:-120}" python3 "$bundle/cupy_reference.py" "$bundle/models/saxpy_cuda/1/saxpy.ptx" \
    || echo "gpu-test: the CuPy comparison failed with $?"
else
  echo "CuPy is not importable here: no comparison"
fi
echo "== gpu-test: exit $rc"
exit "$rc"
