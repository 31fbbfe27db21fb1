package io.backplane.backend.cuda;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;

/**
 * An in-memory CUDA driver for tests: devices, primary contexts with retain counts, a context
 * stack per thread, device memory (host memory behind fake device addresses), pinned memory,
 * streams, modules and kernels written in Java, and injectable failures — including sticky ones
 * that, like the real driver, fail every later call on that device until its primary context is
 * reset. Every resource is counted so tests can assert nothing leaks. Synchronous: work on a
 * stream happens at the call.
 */
final class FakeCudaDriver implements CudaDriver, AutoCloseable {
    /** A kernel: reads and writes device memory through the fake. */
    interface Kernel {
        void run(FakeCudaDriver driver, int gridX, int blockX, List<KernelArg> args);
    }

    private static final long DEVICE_BASE = 0x7f00_0000_0000L;

    private final int version;
    private final int deviceCount;
    private final long totalMemory;
    private final Map<String, Kernel> kernels = new ConcurrentHashMap<>();
    private final int[] retains;
    private final long[] contexts;
    private final Integer[] sticky;
    private final TreeMap<Long, Allocation> device = new TreeMap<>();
    private final Map<Long, Allocation> pinned = new HashMap<>();
    private final Map<Long, Integer> streams = new HashMap<>();
    private final Map<Long, Integer> modules = new HashMap<>();
    private final Map<Long, String> functions = new HashMap<>();
    private final Map<String, Deque<Integer>> failures = new ConcurrentHashMap<>();
    private final ThreadLocal<Deque<Long>> current = ThreadLocal.withInitial(ArrayDeque::new);
    private long nextDevice = DEVICE_BASE;
    private long nextHandle = 0x1000;
    private int functionMaxThreads = 1024;
    private boolean initialized;
    int launches;
    private int leakedAtRelease;

    private record Allocation(int device, MemorySegment memory, Arena arena) {
    }

    FakeCudaDriver(int version, int deviceCount, long totalMemory) {
        this.version = version;
        this.deviceCount = deviceCount;
        this.totalMemory = totalMemory;
        this.retains = new int[deviceCount];
        this.contexts = new long[deviceCount];
        this.sticky = new Integer[deviceCount];
        for (int i = 0; i < deviceCount; i++) {
            contexts[i] = 0xC0_0000L + i;
        }
    }

    /** Registers a kernel that modules of any image expose under {@code name}. */
    FakeCudaDriver kernel(String name, Kernel kernel) {
        kernels.put(name, kernel);
        return this;
    }

    /** The next call of {@code call} (e.g. "cuLaunchKernel") fails with {@code result}. */
    void failNext(String call, int result) {
        failures.computeIfAbsent(call, k -> new ArrayDeque<>()).add(result);
    }

    void functionMaxThreads(int n) {
        functionMaxThreads = n;
    }

    /** The device memory at {@code pointer} (interior pointers allowed), {@code bytes} long. */
    synchronized MemorySegment deviceMemory(long pointer, long bytes) {
        Map.Entry<Long, Allocation> e = device.floorEntry(pointer);
        if (e == null || pointer - e.getKey() + bytes > e.getValue().memory.byteSize()) {
            throw CudaErrors.exception("device access", 700);
        }
        return e.getValue().memory.asSlice(pointer - e.getKey(), bytes);
    }

    synchronized int liveDeviceAllocations() {
        return device.size();
    }

    synchronized long deviceBytesInUse() {
        return device.values().stream().mapToLong(a -> a.memory.byteSize()).sum();
    }

    synchronized int livePinned() {
        return pinned.size();
    }

    synchronized int liveStreams() {
        return streams.size();
    }

    synchronized int liveModules() {
        return modules.size();
    }

    synchronized int retainCount(int ordinal) {
        return retains[ordinal];
    }

    /** The GPU whose context is current on the calling thread (for a kernel that misbehaves on one GPU only). */
    int currentOrdinal() {
        return currentDevice("currentOrdinal");
    }

    int contextDepth() {
        return current.get().size();
    }

    private synchronized void enter(String call) {
        Deque<Integer> f = failures.get(call);
        Integer injected = f == null ? null : f.poll();
        if (injected != null) {
            if (CudaException.isSticky(injected)) {
                Integer d = currentDevice(call);
                sticky[d] = injected;
            }
            throw CudaErrors.exception(call, injected);
        }
    }

    private synchronized int contextual(String call) {
        enter(call);
        if (!initialized) {
            throw CudaErrors.exception(call, 3);
        }
        int d = currentDevice(call);
        if (sticky[d] != null) {
            throw CudaErrors.exception(call, sticky[d]);
        }
        return d;
    }

    private int currentDevice(String call) {
        Long ctx = current.get().peek();
        if (ctx == null) {
            throw CudaErrors.exception(call, 201); // CUDA_ERROR_INVALID_CONTEXT
        }
        for (int i = 0; i < deviceCount; i++) {
            if (contexts[i] == ctx) {
                return i;
            }
        }
        throw CudaErrors.exception(call, 201);
    }

    @Override
    public int driverVersion() {
        enter("cuDriverGetVersion");
        return version;
    }

    @Override
    public synchronized void init() {
        enter("cuInit");
        if (deviceCount == 0) {
            throw CudaErrors.exception("cuInit", 100);
        }
        initialized = true;
    }

    @Override
    public int deviceCount() {
        enter("cuDeviceGetCount");
        return deviceCount;
    }

    @Override
    public int device(int ordinal) {
        enter("cuDeviceGet");
        if (ordinal < 0 || ordinal >= deviceCount) {
            throw CudaErrors.exception("cuDeviceGet", 101);
        }
        return ordinal;
    }

    @Override
    public String deviceName(int device) {
        return "Fake GPU " + device;
    }

    @Override
    public int deviceAttribute(int attribute, int device) {
        return switch (attribute) {
            case ATTRIBUTE_MAX_THREADS_PER_BLOCK -> 1024;
            case ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR -> 9;
            default -> 0;
        };
    }

    @Override
    public long deviceTotalMemory(int device) {
        return totalMemory;
    }

    @Override
    public synchronized long primaryContextRetain(int device) {
        enter("cuDevicePrimaryCtxRetain");
        retains[device]++;
        return contexts[device];
    }

    @Override
    public synchronized void primaryContextRelease(int device) {
        enter("cuDevicePrimaryCtxRelease_v2");
        if (retains[device] == 0) {
            throw CudaErrors.exception("cuDevicePrimaryCtxRelease_v2", 201);
        }
        if (--retains[device] == 0) {
            // The driver destroys a primary context at its last release, and everything in it.
            final int d = device;
            leakedAtRelease += (int) this.device.values().stream().filter(a -> a.device == d).count()
                    + (int) pinned.values().stream().filter(a -> a.device == d).count();
            dropAllocations(d);
            streams.values().removeIf(v -> v == d);
            modules.values().removeIf(v -> v == d);
        }
    }

    private void dropAllocations(int d) {
        for (Map<Long, Allocation> m : List.of(device, pinned)) {
            m.values().removeIf(a -> {
                if (a.device == d) {
                    a.arena.close();
                    return true;
                }
                return false;
            });
        }
    }

    /** Device and pinned allocations the backend left for the final context release to reclaim. */
    synchronized int leakedAtRelease() {
        return leakedAtRelease;
    }

    @Override
    public synchronized void primaryContextReset(int d) {
        enter("cuDevicePrimaryCtxReset_v2");
        sticky[d] = null;
        dropAllocations(d);
        streams.values().removeIf(v -> v == d);
        modules.values().removeIf(v -> v == d);
    }

    @Override
    public void contextPush(long context) {
        enter("cuCtxPushCurrent_v2");
        current.get().push(context);
    }

    @Override
    public long contextPop() {
        enter("cuCtxPopCurrent_v2");
        Long c = current.get().poll();
        if (c == null) {
            throw CudaErrors.exception("cuCtxPopCurrent_v2", 201);
        }
        return c;
    }

    @Override
    public synchronized long streamCreate() {
        int d = contextual("cuStreamCreate");
        long h = nextHandle++;
        streams.put(h, d);
        return h;
    }

    @Override
    public synchronized void streamDestroy(long stream) {
        contextual("cuStreamDestroy_v2");
        if (streams.remove(stream) == null) {
            throw CudaErrors.exception("cuStreamDestroy_v2", 400);
        }
    }

    @Override
    public synchronized void streamSynchronize(long stream) {
        contextual("cuStreamSynchronize");
        if (!streams.containsKey(stream)) {
            throw CudaErrors.exception("cuStreamSynchronize", 400);
        }
    }

    @Override
    public synchronized long memAlloc(long bytes) {
        int d = contextual("cuMemAlloc_v2");
        if (bytes <= 0) {
            throw CudaErrors.exception("cuMemAlloc_v2", 1);
        }
        if (deviceBytesInUse() + bytes > totalMemory) {
            throw CudaErrors.exception("cuMemAlloc_v2", 2);
        }
        long p = nextDevice;
        nextDevice += (bytes + 511) & ~511L;
        Arena a = Arena.ofShared();
        device.put(p, new Allocation(d, a.allocate(bytes, 256), a));
        return p;
    }

    @Override
    public synchronized void memFree(long pointer) {
        contextual("cuMemFree_v2");
        Allocation a = device.remove(pointer);
        if (a == null) {
            throw CudaErrors.exception("cuMemFree_v2", 1);
        }
        a.arena.close();
    }

    @Override
    public synchronized MemorySegment memHostAlloc(long bytes) {
        int d = contextual("cuMemHostAlloc");
        Arena a = Arena.ofShared();
        MemorySegment s = a.allocate(bytes, 4096);
        pinned.put(s.address(), new Allocation(d, s, a));
        return s;
    }

    @Override
    public synchronized void memFreeHost(MemorySegment segment) {
        contextual("cuMemFreeHost");
        Allocation a = pinned.remove(segment.address());
        if (a == null) {
            throw CudaErrors.exception("cuMemFreeHost", 1);
        }
        a.arena.close();
    }

    @Override
    public synchronized void memcpyHtoDAsync(long dst, MemorySegment src, long bytes, long stream) {
        contextual("cuMemcpyHtoDAsync_v2");
        MemorySegment.copy(src, 0, deviceMemory(dst, bytes), 0, bytes);
    }

    @Override
    public synchronized void memcpyDtoHAsync(MemorySegment dst, long src, long bytes, long stream) {
        contextual("cuMemcpyDtoHAsync_v2");
        MemorySegment.copy(deviceMemory(src, bytes), 0, dst, 0, bytes);
    }

    @Override
    public synchronized void memcpyHtoD(long dst, MemorySegment src, long bytes) {
        contextual("cuMemcpyHtoD_v2");
        MemorySegment.copy(src, 0, deviceMemory(dst, bytes), 0, bytes);
    }

    @Override
    public synchronized void memcpyDtoH(MemorySegment dst, long src, long bytes) {
        contextual("cuMemcpyDtoH_v2");
        MemorySegment.copy(deviceMemory(src, bytes), 0, dst, 0, bytes);
    }

    /**
     * Exports device allocation {@code pointer} as another process would with
     * {@code cuIpcGetMemHandle}: 64 bytes that {@link #ipcOpenMemHandle} maps back to it.
     */
    synchronized byte[] exportHandle(long pointer) {
        return ipcGetMemHandle(pointer);
    }

    @Override
    public synchronized byte[] ipcGetMemHandle(long pointer) {
        if (!device.containsKey(pointer)) {
            throw CudaErrors.exception("cuIpcGetMemHandle", 1);
        }
        byte[] h = new byte[IPC_HANDLE_BYTES];
        java.nio.ByteBuffer.wrap(h).putLong(IPC_MAGIC).putLong(pointer);
        return h;
    }

    private static final long IPC_MAGIC = 0x4241_434B_5049_5043L;
    /** Opened IPC mappings: the pointer handed out, to its count of opens not yet closed. */
    private final Map<Long, Long> ipcOpen = new HashMap<>();
    private int ipcOpens;
    private int ipcCloses;

    @Override
    public synchronized long ipcOpenMemHandle(byte[] handle) {
        contextual("cuIpcOpenMemHandle_v2");
        java.nio.ByteBuffer b = java.nio.ByteBuffer.wrap(handle);
        if (handle.length != IPC_HANDLE_BYTES || b.getLong() != IPC_MAGIC) {
            throw CudaErrors.exception("cuIpcOpenMemHandle_v2", 1); // CUDA_ERROR_INVALID_VALUE
        }
        long target = b.getLong();
        if (!device.containsKey(target)) {
            throw CudaErrors.exception("cuIpcOpenMemHandle_v2", 400); // CUDA_ERROR_INVALID_HANDLE
        }
        // A handle opened again in the same context: the driver counts the opens and returns the same pointer.
        ipcOpen.merge(target, 1L, Long::sum);
        ipcOpens++;
        return target;
    }

    @Override
    public synchronized void ipcCloseMemHandle(long pointer) {
        contextual("cuIpcCloseMemHandle");
        Long n = ipcOpen.get(pointer);
        if (n == null) {
            throw CudaErrors.exception("cuIpcCloseMemHandle", 400); // closed twice, or never opened
        }
        if (n == 1) {
            ipcOpen.remove(pointer);
        } else {
            ipcOpen.put(pointer, n - 1);
        }
        ipcCloses++;
    }

    /** IPC mappings open now. */
    synchronized int liveIpcMappings() {
        return ipcOpen.values().stream().mapToInt(Long::intValue).sum();
    }

    synchronized int ipcOpens() {
        return ipcOpens;
    }

    synchronized int ipcCloses() {
        return ipcCloses;
    }

    @Override
    public synchronized void memcpyDtoDAsync(long dst, long src, long bytes, long stream) {
        contextual("cuMemcpyDtoDAsync_v2");
        MemorySegment.copy(deviceMemory(src, bytes), 0, deviceMemory(dst, bytes), 0, bytes);
    }

    @Override
    public synchronized MemInfo memGetInfo() {
        int d = contextual("cuMemGetInfo_v2");
        long used = device.values().stream().filter(a -> a.device == d).mapToLong(a -> a.memory.byteSize()).sum();
        return new MemInfo(totalMemory - used, totalMemory);
    }

    @Override
    public synchronized long moduleLoadData(byte[] image) {
        int d = contextual("cuModuleLoadDataEx");
        long h = nextHandle++;
        modules.put(h, d);
        return h;
    }

    @Override
    public synchronized void moduleUnload(long module) {
        contextual("cuModuleUnload");
        if (modules.remove(module) == null) {
            throw CudaErrors.exception("cuModuleUnload", 400);
        }
    }

    @Override
    public synchronized long moduleGetFunction(long module, String name) {
        contextual("cuModuleGetFunction");
        if (!modules.containsKey(module)) {
            throw CudaErrors.exception("cuModuleGetFunction", 400);
        }
        if (!kernels.containsKey(name)) {
            throw CudaErrors.exception("cuModuleGetFunction(" + name + ")", 500);
        }
        long h = nextHandle++;
        functions.put(h, name);
        return h;
    }

    @Override
    public synchronized int functionAttribute(int attribute, long function) {
        contextual("cuFuncGetAttribute");
        return functionMaxThreads;
    }

    /** Checks and counts under the driver's lock, then runs the kernel outside it, as a GPU runs beside the host. */
    @Override
    public void launchKernel(long function, int gridX, int blockX, long stream, List<KernelArg> args) {
        Kernel kernel;
        int d;
        synchronized (this) {
            d = contextual("cuLaunchKernel");
            String name = functions.get(function);
            if (name == null || !streams.containsKey(stream)) {
                throw CudaErrors.exception("cuLaunchKernel", 400);
            }
            launches++;
            kernel = kernels.get(name);
        }
        try {
            kernel.run(this, gridX, blockX, args);
        } catch (CudaException e) {
            synchronized (this) {
                sticky[d] = e.result(); // a fault inside the kernel poisons the context
            }
            throw e;
        }
    }

    @Override
    public synchronized void close() {
        for (int d = 0; d < deviceCount; d++) {
            dropAllocations(d);
        }
    }

    /** saxpy as the sample's kernel_args pass it: (count, fp32 a, x, y, out). */
    static final Kernel SAXPY = (driver, gridX, blockX, args) -> {
        int n = ((KernelArg.Int32) args.get(0)).value();
        float a = ((KernelArg.Float32) args.get(1)).value();
        if ((long) gridX * blockX < n) {
            throw new AssertionError("grid " + gridX + " x " + blockX + " does not cover " + n + " elements");
        }
        MemorySegment x = driver.deviceMemory(((KernelArg.Pointer) args.get(2)).address(), 4L * n);
        MemorySegment y = driver.deviceMemory(((KernelArg.Pointer) args.get(3)).address(), 4L * n);
        MemorySegment out = driver.deviceMemory(((KernelArg.Pointer) args.get(4)).address(), 4L * n);
        for (int i = 0; i < n; i++) {
            float v = Math.fma(a, x.getAtIndex(java.lang.foreign.ValueLayout.JAVA_FLOAT_UNALIGNED, i),
                    y.getAtIndex(java.lang.foreign.ValueLayout.JAVA_FLOAT_UNALIGNED, i));
            out.setAtIndex(java.lang.foreign.ValueLayout.JAVA_FLOAT_UNALIGNED, i, v);
        }
    };
}
