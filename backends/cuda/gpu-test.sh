#!/usr/bin/env bash
# The GPU test: runs on a machine with an NVIDIA GPU and driver, using the bundle from
# make-gpu-bundle.sh; needs no JDK there. Takes well under 10 minutes (each step has a timeout).
#
#   backends/cuda/gpu-test.sh            # from a checkout that holds backends/cuda/gpu-bundle/
#   gpu-bundle/gpu-test.sh               # or from inside a copied or unpacked bundle
#
# On the device machine of a session (the run tool), carrying the archive:
#   run(command="tar -xzf backends/cuda/gpu-bundle.tar.gz -C /tmp && /tmp/gpu-bundle/gpu-test.sh",
#       carry=["backends/cuda/gpu-bundle.tar.gz"], timeout_s=540)
# With $OUT set (as there) the whole log is also written to $OUT/gpu-test.log, since the run
# tool's reply keeps only the output's tail.
#
# Sections, numbered as issue 38 lists them:
#   0  what the machine has: nvidia-smi, CUDA libraries, Python packages (for steps 4 and 5)
#   1  GpuSelfTest: correctness against a CPU reference, device memory back to its baseline after
#      unload, bandwidth and launch-overhead figures; and inside the same run
#   2  placement: KIND_AUTO, no instance_group and gpus: [0] land on GPU 0; a missing GPU id is refused
#   3  the cudasharedmemory extension over REST and gRPC with real CUDA IPC handles from a client
#      in another process (CudaIpcClient, over the driver API)
#   1b the fault test, in its own process; 1c the same PTX through CuPy when CuPy is importable
#   4, 5 say whether this machine could run them and why not (see docs/backends/cuda.md)
# Exit status: the self-test's (0 passed, 1 a check failed, 2 no usable CUDA driver or device).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ -x "$here/runtime/bin/java" ]; then bundle=$here; else bundle=$here/gpu-bundle; fi
if [ ! -x "$bundle/runtime/bin/java" ]; then
  echo "gpu-test: no bundle at $bundle; build it with backends/cuda/make-gpu-bundle.sh on a machine with JDK 25" >&2
  exit 3
fi
if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then
  exec > >(tee "$OUT/gpu-test.log") 2>&1
fi
java=("$bundle/runtime/bin/java" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow -Xmx2g -XX:+UseSerialGC
  -Dorg.slf4j.simpleLogger.defaultLogLevel=info -Dorg.slf4j.simpleLogger.showDateTime=true
  -Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS -Dorg.slf4j.simpleLogger.showThreadName=false
  -Dorg.slf4j.simpleLogger.logFile=System.out
  -cp "$bundle/lib/*" io.backplane.backend.cuda.GpuSelfTest --model-dir "$bundle/models/saxpy_cuda")

echo "== gpu-test: $(date -u +%FT%TZ) on $(hostname)"
echo "== 0 the machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv 2>/dev/null \
  || echo "gpu-test: nvidia-smi is missing or failed (the self-test will say what CUDA lacks)"
echo "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-<unset>}"
for lib in libcuda.so.1 libcudart.so libcublas.so libcudnn.so; do
  found=$(ldconfig -p 2>/dev/null | grep -m1 -F "$lib" | sed 's/.*=> //')
  echo "library $lib: ${found:-not in ldconfig -p}"
done
py=$(command -v python3 || true)
if [ -n "$py" ]; then
  echo "python3: $("$py" --version 2>&1)"
  for mod in torch cupy cuda numpy; do
    "$py" - "$mod" <<'PY' 2>/dev/null || echo "python module $mod: not importable"
import importlib, sys
m = importlib.import_module(sys.argv[1])
extra = ""
if sys.argv[1] == "torch":
    extra = f", CUDA build {m.version.cuda}, cuda.is_available() {m.cuda.is_available()}"
print(f"python module {sys.argv[1]}: {getattr(m, '__version__', '?')}{extra}")
PY
  done
else
  echo "python3: not on PATH"
fi

echo "== 1-3 self-test (correctness, memory, figures; placement; CUDA shared memory with a child-process client)"
timeout "${GPU_SELF_TEST_TIMEOUT:-300}" "${java[@]}" "$@"
rc=$?
if [ "$rc" -eq 124 ]; then echo "gpu-test: the self-test timed out" >&2; fi

if [ "$rc" -eq 0 ] || [ "$rc" -eq 1 ]; then
  echo "== 1b fault test (informational, own process)"
  timeout "${GPU_FAULT_TEST_TIMEOUT:-120}" "${java[@]}" --fault-test || echo "gpu-test: fault test exited with $?"
fi

echo "== 1c CuPy comparison"
if [ -n "$py" ] && "$py" -c 'import cupy' 2>/dev/null; then
  timeout "${GPU_CUPY_TIMEOUT:-120}" "$py" "$bundle/cupy_reference.py" "$bundle/models/saxpy_cuda/1/saxpy.ptx" \
    || echo "gpu-test: the CuPy comparison failed with $?"
else
  echo "CuPy is not importable here: no comparison"
fi

echo "== 4 GPU tensors through the Python backend"
echo "NOT RUN: the python backend takes host-memory tensors only (docs/backends/python.md: GPU tensors are not supported yet)"
if [ -n "$py" ] && "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "  torch with CUDA is importable here, so this machine could run that step once the backend has GPU tensors"
else
  echo "  and it would need torch with CUDA on this machine: a CUDA build of torch with its NVIDIA libraries is gigabytes, more than a device run carries (64 MiB)"
fi

echo "== 5 ONNX Runtime's CUDA execution provider"
echo "NOT RUN: needs com.microsoft.onnxruntime:onnxruntime_gpu (642 MB for 1.29.0) and cuDNN 9 beside the CUDA 12 runtime; a device run carries 64 MiB"

echo "== gpu-test: exit $rc"
exit "$rc"
