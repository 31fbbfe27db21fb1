package io.backplane.backend.cuda;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_DOUBLE;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * {@link CudaDriver} over {@code libcuda.so.1} through the foreign function and memory API.
 *
 * <p>{@link #bind} resolves every function of {@link #SYMBOLS} at once, so a driver too old for
 * this backend fails at bind time naming the missing symbol, never later in the middle of a
 * request. Which library is bound, and that it is bound only once per process, is
 * {@link CudaLibrary}'s business.
 */
final class FfmCudaDriver implements CudaDriver {
    private static final FunctionDescriptor RESULT_INT = FunctionDescriptor.of(JAVA_INT, JAVA_INT);
    private static final FunctionDescriptor RESULT_PTR = FunctionDescriptor.of(JAVA_INT, ADDRESS);
    private static final FunctionDescriptor RESULT_LONG = FunctionDescriptor.of(JAVA_INT, JAVA_LONG);
    private static final FunctionDescriptor RESULT_PTR_INT = FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT);
    private static final FunctionDescriptor RESULT_PTR_LONG = FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG);
    /** {@code CUipcMemHandle}: {@code struct { char reserved[64]; }}. */
    static final java.lang.foreign.StructLayout IPC_HANDLE = java.lang.foreign.MemoryLayout.structLayout(
            java.lang.foreign.MemoryLayout.sequenceLayout(IPC_HANDLE_BYTES, JAVA_BYTE));
    private static final int CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1;

    /**
     * Every driver function this backend calls: the ABI symbol (the {@code _v2} names that
     * {@code cuda.h} maps the API names to) and its C signature. {@code CUdevice} and enums are
     * {@code int}; {@code CUdeviceptr} and {@code size_t} are 64-bit; handles are pointers.
     */
    static final Map<String, FunctionDescriptor> SYMBOLS = symbols();

    private static Map<String, FunctionDescriptor> symbols() {
        Map<String, FunctionDescriptor> m = new LinkedHashMap<>();
        m.put("cuGetErrorName", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS));
        m.put("cuGetErrorString", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS));
        m.put("cuDriverGetVersion", RESULT_PTR);
        m.put("cuInit", RESULT_INT);
        m.put("cuDeviceGetCount", RESULT_PTR);
        m.put("cuDeviceGet", RESULT_PTR_INT);
        m.put("cuDeviceGetName", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT));
        m.put("cuDeviceGetAttribute", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT));
        m.put("cuDeviceTotalMem_v2", RESULT_PTR_INT);
        m.put("cuDevicePrimaryCtxRetain", RESULT_PTR_INT);
        m.put("cuDevicePrimaryCtxRelease_v2", RESULT_INT);
        m.put("cuDevicePrimaryCtxReset_v2", RESULT_INT);
        m.put("cuCtxPushCurrent_v2", RESULT_PTR);
        m.put("cuCtxPopCurrent_v2", RESULT_PTR);
        m.put("cuStreamCreate", RESULT_PTR_INT);
        m.put("cuStreamDestroy_v2", RESULT_PTR);
        m.put("cuStreamSynchronize", RESULT_PTR);
        m.put("cuMemAlloc_v2", RESULT_PTR_LONG);
        m.put("cuMemFree_v2", RESULT_LONG);
        m.put("cuMemHostAlloc", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));
        m.put("cuMemFreeHost", RESULT_PTR);
        m.put("cuMemcpyHtoDAsync_v2", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, ADDRESS, JAVA_LONG, ADDRESS));
        m.put("cuMemcpyDtoHAsync_v2", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG, ADDRESS));
        m.put("cuMemcpyDtoDAsync_v2", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG, ADDRESS));
        m.put("cuMemGetInfo_v2", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        m.put("cuMemcpyHtoD_v2", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, ADDRESS, JAVA_LONG));
        m.put("cuMemcpyDtoH_v2", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG));
        // CUipcMemHandle is a struct of 64 chars, passed by value.
        m.put("cuIpcGetMemHandle", RESULT_PTR_LONG);
        m.put("cuIpcOpenMemHandle_v2", FunctionDescriptor.of(JAVA_INT, ADDRESS, IPC_HANDLE, JAVA_INT));
        m.put("cuIpcCloseMemHandle", RESULT_LONG);
        m.put("cuModuleLoadDataEx", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT, ADDRESS, ADDRESS));
        m.put("cuModuleUnload", RESULT_PTR);
        m.put("cuModuleGetFunction", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
        m.put("cuFuncGetAttribute", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, ADDRESS));
        m.put("cuLaunchKernel", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT,
                JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
        return java.util.Collections.unmodifiableMap(m);
    }

    private static final int CU_STREAM_NON_BLOCKING = 1;
    private static final int CU_MEMHOSTALLOC_PORTABLE = 1;
    private static final int CU_JIT_ERROR_LOG_BUFFER = 5;
    private static final int CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;
    private static final int JIT_LOG_BYTES = 16 * 1024;

    private final MethodHandle getErrorName;
    private final MethodHandle getErrorString;
    private final MethodHandle driverGetVersion;
    private final MethodHandle init;
    private final MethodHandle deviceGetCount;
    private final MethodHandle deviceGet;
    private final MethodHandle deviceGetName;
    private final MethodHandle deviceGetAttribute;
    private final MethodHandle deviceTotalMem;
    private final MethodHandle primaryCtxRetain;
    private final MethodHandle primaryCtxRelease;
    private final MethodHandle primaryCtxReset;
    private final MethodHandle ctxPushCurrent;
    private final MethodHandle ctxPopCurrent;
    private final MethodHandle streamCreate;
    private final MethodHandle streamDestroy;
    private final MethodHandle streamSynchronize;
    private final MethodHandle memAlloc;
    private final MethodHandle memFree;
    private final MethodHandle memHostAlloc;
    private final MethodHandle memFreeHost;
    private final MethodHandle memcpyHtoDAsync;
    private final MethodHandle memcpyDtoHAsync;
    private final MethodHandle memcpyDtoDAsync;
    private final MethodHandle memGetInfo;
    private final MethodHandle memcpyHtoD;
    private final MethodHandle memcpyDtoH;
    private final MethodHandle ipcGetMemHandle;
    private final MethodHandle ipcOpenMemHandle;
    private final MethodHandle ipcCloseMemHandle;
    private final MethodHandle moduleLoadDataEx;
    private final MethodHandle moduleUnload;
    private final MethodHandle moduleGetFunction;
    private final MethodHandle funcGetAttribute;
    private final MethodHandle launchKernel;

    private FfmCudaDriver(Map<String, MethodHandle> h) {
        getErrorName = h.get("cuGetErrorName");
        getErrorString = h.get("cuGetErrorString");
        driverGetVersion = h.get("cuDriverGetVersion");
        init = h.get("cuInit");
        deviceGetCount = h.get("cuDeviceGetCount");
        deviceGet = h.get("cuDeviceGet");
        deviceGetName = h.get("cuDeviceGetName");
        deviceGetAttribute = h.get("cuDeviceGetAttribute");
        deviceTotalMem = h.get("cuDeviceTotalMem_v2");
        primaryCtxRetain = h.get("cuDevicePrimaryCtxRetain");
        primaryCtxRelease = h.get("cuDevicePrimaryCtxRelease_v2");
        primaryCtxReset = h.get("cuDevicePrimaryCtxReset_v2");
        ctxPushCurrent = h.get("cuCtxPushCurrent_v2");
        ctxPopCurrent = h.get("cuCtxPopCurrent_v2");
        streamCreate = h.get("cuStreamCreate");
        streamDestroy = h.get("cuStreamDestroy_v2");
        streamSynchronize = h.get("cuStreamSynchronize");
        memAlloc = h.get("cuMemAlloc_v2");
        memFree = h.get("cuMemFree_v2");
        memHostAlloc = h.get("cuMemHostAlloc");
        memFreeHost = h.get("cuMemFreeHost");
        memcpyHtoDAsync = h.get("cuMemcpyHtoDAsync_v2");
        memcpyDtoHAsync = h.get("cuMemcpyDtoHAsync_v2");
        memcpyDtoDAsync = h.get("cuMemcpyDtoDAsync_v2");
        memGetInfo = h.get("cuMemGetInfo_v2");
        memcpyHtoD = h.get("cuMemcpyHtoD_v2");
        memcpyDtoH = h.get("cuMemcpyDtoH_v2");
        ipcGetMemHandle = h.get("cuIpcGetMemHandle");
        ipcOpenMemHandle = h.get("cuIpcOpenMemHandle_v2");
        ipcCloseMemHandle = h.get("cuIpcCloseMemHandle");
        moduleLoadDataEx = h.get("cuModuleLoadDataEx");
        moduleUnload = h.get("cuModuleUnload");
        moduleGetFunction = h.get("cuModuleGetFunction");
        funcGetAttribute = h.get("cuFuncGetAttribute");
        launchKernel = h.get("cuLaunchKernel");
    }

    /**
     * Binds every function of {@link #SYMBOLS} found through {@code lookup}.
     *
     * @throws MissingSymbolsException naming every symbol the library lacks
     */
    @SuppressWarnings("restricted")
    static FfmCudaDriver bind(SymbolLookup lookup) {
        Linker linker = Linker.nativeLinker();
        Map<String, MethodHandle> handles = new LinkedHashMap<>();
        List<String> missing = new ArrayList<>();
        SYMBOLS.forEach((name, descriptor) -> lookup.find(name).ifPresentOrElse(
                address -> handles.put(name, linker.downcallHandle(address, descriptor)),
                () -> missing.add(name)));
        if (!missing.isEmpty()) {
            throw new MissingSymbolsException(missing);
        }
        return new FfmCudaDriver(handles);
    }

    /** The library lacks functions this backend needs (a driver older than CUDA 11, or not libcuda). */
    static final class MissingSymbolsException extends RuntimeException {
        @java.io.Serial
        private static final long serialVersionUID = 1L;

        MissingSymbolsException(List<String> names) {
            super("the library has no " + String.join(", ", names)
                    + "; this backend needs the CUDA driver API of CUDA 11.0 or newer");
        }
    }

    @Override
    public int driverVersion() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(JAVA_INT);
            check("cuDriverGetVersion", (int) driverGetVersion.invokeExact(out));
            return out.get(JAVA_INT, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public void init() {
        try {
            check("cuInit", (int) init.invokeExact(0));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public int deviceCount() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(JAVA_INT);
            check("cuDeviceGetCount", (int) deviceGetCount.invokeExact(out));
            return out.get(JAVA_INT, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public int device(int ordinal) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(JAVA_INT);
            check("cuDeviceGet", (int) deviceGet.invokeExact(out, ordinal));
            return out.get(JAVA_INT, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public String deviceName(int device) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(256);
            check("cuDeviceGetName", (int) deviceGetName.invokeExact(out, 256, device));
            return out.getString(0, StandardCharsets.UTF_8);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public int deviceAttribute(int attribute, int device) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(JAVA_INT);
            check("cuDeviceGetAttribute", (int) deviceGetAttribute.invokeExact(out, attribute, device));
            return out.get(JAVA_INT, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public long deviceTotalMemory(int device) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(JAVA_LONG);
            check("cuDeviceTotalMem_v2", (int) deviceTotalMem.invokeExact(out, device));
            return out.get(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public long primaryContextRetain(int device) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            check("cuDevicePrimaryCtxRetain", (int) primaryCtxRetain.invokeExact(out, device));
            return out.get(ADDRESS, 0).address();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public void primaryContextRelease(int device) {
        try {
            check("cuDevicePrimaryCtxRelease_v2", (int) primaryCtxRelease.invokeExact(device));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public void primaryContextReset(int device) {
        try {
            check("cuDevicePrimaryCtxReset_v2", (int) primaryCtxReset.invokeExact(device));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public void contextPush(long context) {
        try {
            check("cuCtxPushCurrent_v2", (int) ctxPushCurrent.invokeExact(MemorySegment.ofAddress(context)));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public long contextPop() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            check("cuCtxPopCurrent_v2", (int) ctxPopCurrent.invokeExact(out));
            return out.get(ADDRESS, 0).address();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public long streamCreate() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            check("cuStreamCreate", (int) streamCreate.invokeExact(out, CU_STREAM_NON_BLOCKING));
            return out.get(ADDRESS, 0).address();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public void streamDestroy(long stream) {
        try {
            check("cuStreamDestroy_v2", (int) streamDestroy.invokeExact(MemorySegment.ofAddress(stream)));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public void streamSynchronize(long stream) {
        try {
            check("cuStreamSynchronize", (int) streamSynchronize.invokeExact(MemorySegment.ofAddress(stream)));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public long memAlloc(long bytes) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(JAVA_LONG);
            check("cuMemAlloc_v2", (int) memAlloc.invokeExact(out, bytes));
            return out.get(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public void memFree(long devicePointer) {
        try {
            check("cuMemFree_v2", (int) memFree.invokeExact(devicePointer));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    @SuppressWarnings("restricted")
    public MemorySegment memHostAlloc(long bytes) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            check("cuMemHostAlloc", (int) memHostAlloc.invokeExact(out, bytes, CU_MEMHOSTALLOC_PORTABLE));
            return out.get(ADDRESS, 0).reinterpret(bytes);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public void memFreeHost(MemorySegment pinned) {
        try {
            check("cuMemFreeHost", (int) memFreeHost.invokeExact(pinned));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public void memcpyHtoDAsync(long dst, MemorySegment src, long bytes, long stream) {
        requireNative(src, bytes, "cuMemcpyHtoDAsync_v2 source");
        try {
            check("cuMemcpyHtoDAsync_v2", (int) memcpyHtoDAsync.invokeExact(dst, src, bytes, MemorySegment.ofAddress(stream)));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public void memcpyDtoHAsync(MemorySegment dst, long src, long bytes, long stream) {
        requireNative(dst, bytes, "cuMemcpyDtoHAsync_v2 destination");
        try {
            check("cuMemcpyDtoHAsync_v2", (int) memcpyDtoHAsync.invokeExact(dst, src, bytes, MemorySegment.ofAddress(stream)));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public void memcpyHtoD(long dst, MemorySegment src, long bytes) {
        requireNative(src, bytes, "cuMemcpyHtoD_v2 source");
        try {
            check("cuMemcpyHtoD_v2", (int) memcpyHtoD.invokeExact(dst, src, bytes));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public void memcpyDtoH(MemorySegment dst, long src, long bytes) {
        requireNative(dst, bytes, "cuMemcpyDtoH_v2 destination");
        try {
            check("cuMemcpyDtoH_v2", (int) memcpyDtoH.invokeExact(dst, src, bytes));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public byte[] ipcGetMemHandle(long devicePointer) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment h = a.allocate(IPC_HANDLE);
            check("cuIpcGetMemHandle", (int) ipcGetMemHandle.invokeExact(h, devicePointer));
            return h.toArray(JAVA_BYTE);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public long ipcOpenMemHandle(byte[] handle) {
        if (handle.length != IPC_HANDLE_BYTES) {
            throw new IllegalArgumentException("a CUDA IPC handle is " + IPC_HANDLE_BYTES + " bytes, not " + handle.length);
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(JAVA_LONG);
            MemorySegment h = a.allocate(IPC_HANDLE);
            MemorySegment.copy(handle, 0, h, JAVA_BYTE, 0, IPC_HANDLE_BYTES);
            check("cuIpcOpenMemHandle_v2", (int) ipcOpenMemHandle.invokeExact(out, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
            return out.get(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public void ipcCloseMemHandle(long devicePointer) {
        try {
            check("cuIpcCloseMemHandle", (int) ipcCloseMemHandle.invokeExact(devicePointer));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public void memcpyDtoDAsync(long dst, long src, long bytes, long stream) {
        try {
            check("cuMemcpyDtoDAsync_v2", (int) memcpyDtoDAsync.invokeExact(dst, src, bytes, MemorySegment.ofAddress(stream)));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public MemInfo memGetInfo() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment free = a.allocate(JAVA_LONG);
            MemorySegment total = a.allocate(JAVA_LONG);
            check("cuMemGetInfo_v2", (int) memGetInfo.invokeExact(free, total));
            return new MemInfo(free.get(JAVA_LONG, 0), total.get(JAVA_LONG, 0));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    @SuppressWarnings("restricted")
    public long moduleLoadData(byte[] image) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment img = a.allocate(image.length + 1L);
            MemorySegment.copy(image, 0, img, JAVA_BYTE, 0, image.length);
            img.set(JAVA_BYTE, image.length, (byte) 0);
            MemorySegment log = a.allocate(JIT_LOG_BYTES);
            MemorySegment options = a.allocateFrom(JAVA_INT, CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
            MemorySegment values = a.allocate(ADDRESS, 2);
            values.setAtIndex(ADDRESS, 0, log);
            values.setAtIndex(ADDRESS, 1, MemorySegment.ofAddress(JIT_LOG_BYTES));
            MemorySegment out = a.allocate(ADDRESS);
            int rc = (int) moduleLoadDataEx.invokeExact(out, img, 2, options, values);
            if (rc != 0) {
                String jitLog = log.getString(0, StandardCharsets.UTF_8).strip();
                throw CudaErrors.exception("cuModuleLoadDataEx", rc, this::nameOf, this::describe,
                        jitLog.isEmpty() ? "" : "; JIT log: " + jitLog);
            }
            return out.get(ADDRESS, 0).address();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public void moduleUnload(long module) {
        try {
            check("cuModuleUnload", (int) moduleUnload.invokeExact(MemorySegment.ofAddress(module)));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public long moduleGetFunction(long module, String name) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            check("cuModuleGetFunction(" + name + ")", (int) moduleGetFunction.invokeExact(out, MemorySegment.ofAddress(module),
                    a.allocateFrom(name, StandardCharsets.UTF_8)));
            return out.get(ADDRESS, 0).address();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public int functionAttribute(int attribute, long function) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(JAVA_INT);
            check("cuFuncGetAttribute", (int) funcGetAttribute.invokeExact(out, attribute, MemorySegment.ofAddress(function)));
            return out.get(JAVA_INT, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    @Override
    public void launchKernel(long function, int gridX, int blockX, long stream, List<KernelArg> args) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment params = a.allocate(ADDRESS, Math.max(1, args.size()));
            for (int i = 0; i < args.size(); i++) {
                MemorySegment slot = a.allocate(8, 8);
                switch (args.get(i)) {
                    case KernelArg.Pointer p -> slot.set(JAVA_LONG, 0, p.address());
                    case KernelArg.Int32 v -> slot.set(JAVA_INT, 0, v.value());
                    case KernelArg.Int64 v -> slot.set(JAVA_LONG, 0, v.value());
                    case KernelArg.Float32 v -> slot.set(JAVA_FLOAT, 0, v.value());
                    case KernelArg.Float64 v -> slot.set(JAVA_DOUBLE, 0, v.value());
                }
                params.setAtIndex(ADDRESS, i, slot);
            }
            check("cuLaunchKernel", (int) launchKernel.invokeExact(MemorySegment.ofAddress(function), gridX, 1, 1, blockX, 1, 1, 0,
                    MemorySegment.ofAddress(stream), params, MemorySegment.NULL));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** The driver's name for {@code result}, or null when it does not know it. */
    @SuppressWarnings("restricted")
    String nameOf(int result) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            int rc = (int) getErrorName.invokeExact(result, out);
            MemorySegment p = out.get(ADDRESS, 0);
            return rc != 0 || p.equals(MemorySegment.NULL) ? null : p.reinterpret(256).getString(0, StandardCharsets.UTF_8);
        } catch (Throwable t) {
            return null;
        }
    }

    /** The driver's description of {@code result}, or null when it does not know it. */
    @SuppressWarnings("restricted")
    String describe(int result) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            int rc = (int) getErrorString.invokeExact(result, out);
            MemorySegment p = out.get(ADDRESS, 0);
            return rc != 0 || p.equals(MemorySegment.NULL) ? null : p.reinterpret(1024).getString(0, StandardCharsets.UTF_8);
        } catch (Throwable t) {
            return null;
        }
    }

    private void check(String call, int result) {
        if (result != 0) {
            throw CudaErrors.exception(call, result, this::nameOf, this::describe, "");
        }
    }

    private static void requireNative(MemorySegment segment, long bytes, String what) {
        if (!segment.isNative()) {
            throw new IllegalArgumentException(what + " must be native (pinned) memory, not a heap segment");
        }
        if (segment.byteSize() < bytes) {
            throw new IllegalArgumentException(what + " holds " + segment.byteSize() + " bytes, fewer than the " + bytes + " to copy");
        }
    }

    private static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException r) {
            return r;
        }
        if (t instanceof Error e) {
            throw e;
        }
        return new IllegalStateException("unexpected checked exception from a downcall", t);
    }
}
