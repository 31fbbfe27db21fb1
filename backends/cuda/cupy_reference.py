"""The saxpy sample's PTX run through CuPy, for comparison with GpuSelfTest's figures.

Usage: python3 cupy_reference.py path/to/saxpy.ptx   (gpu-test.sh runs it when CuPy imports)
Prints FIGURE lines in the self-test's format; checks the result against NumPy.
"""
import sys
import time

import cupy as cp
import numpy as np

ptx = sys.argv[1]
fn = cp.RawModule(path=ptx).get_function("saxpy")
n = 1 << 20
rng = np.random.default_rng(42)
x = rng.uniform(-100, 100, n).astype(np.float32)
y = rng.uniform(-100, 100, n).astype(np.float32)
dx, dy = cp.asarray(x), cp.asarray(y)
out = cp.empty_like(dx)
block = 256
fn(((n + block - 1) // block,), (block,), (np.int32(n), np.float32(2.0), dx, dy, out))
ok = np.array_equal(cp.asnumpy(out), np.float32(2.0) * x + y) or np.allclose(cp.asnumpy(out), 2.0 * x + y, rtol=1e-6)
print("PASS" if ok else "FAIL", "CuPy saxpy of", n, "elements matches NumPy")

one = (np.int32(1), np.float32(2.0), dx, dy, out)
stream = cp.cuda.Stream(non_blocking=True)
with stream:
    for _ in range(500):
        fn((1,), (32,), one)
    stream.synchronize()
    t0 = time.perf_counter()
    for _ in range(10000):
        fn((1,), (32,), one)
    stream.synchronize()
    print("FIGURE CuPy RawKernel launch, 10000 queued then one sync: %.2f us per launch" % ((time.perf_counter() - t0) / 10000 * 1e6))
    t0 = time.perf_counter()
    for _ in range(2000):
        fn((1,), (32,), one)
        stream.synchronize()
    print("FIGURE CuPy RawKernel launch + sync, each: %.2f us per launch" % ((time.perf_counter() - t0) / 2000 * 1e6))

nbytes = 64 << 20
pinned = cp.cuda.alloc_pinned_memory(nbytes)
host = np.frombuffer(pinned, dtype=np.uint8, count=nbytes)
dev = cp.empty(nbytes, dtype=cp.uint8)
reps = 20
with stream:
    dev.set(host, stream=stream)
    stream.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        dev.set(host, stream=stream)
    stream.synchronize()
    h2d = nbytes * reps / (time.perf_counter() - t0) / 1e9
    t0 = time.perf_counter()
    for _ in range(reps):
        dev.get(stream=stream, out=host)
    stream.synchronize()
    d2h = nbytes * reps / (time.perf_counter() - t0) / 1e9
print("FIGURE CuPy bandwidth, pinned host memory, 64 MiB x %d: host->device %.2f GB/s, device->host %.2f GB/s" % (reps, h2d, d2h))
sys.exit(0 if ok else 1)
