package io.backplane.backend.cuda;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_DOUBLE;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The FFM binding, without a GPU: the symbol table is checked against CUDA's own header, and the
 * real {@link FfmCudaDriver} is bound to a "libcuda" made of upcall stubs, so every downcall
 * marshals its arguments and out-parameters through the native ABI exactly as it will with
 * {@code libcuda.so.1}.
 */
@SuppressWarnings("restricted")
class FfmCudaDriverTest {
    private static final Path CUDA_H = Path.of("/usr/local/cuda/include/cuda.h");
    private static Arena arena;
    private static FfmCudaDriver driver;
    private static final List<Object> LAUNCH = new ArrayList<>();
    private static volatile String lastImage;
    private static volatile long lastFreed;

    @BeforeAll
    static void bindToUpcallFake() throws ReflectiveOperationException {
        arena = Arena.ofShared();
        Map<String, MemorySegment> stubs = new HashMap<>();
        Map<String, Method> impls = new HashMap<>();
        for (Method m : FfmCudaDriverTest.class.getDeclaredMethods()) {
            if (Modifier.isStatic(m.getModifiers()) && m.getName().startsWith("cu")) {
                impls.put(m.getName(), m);
            }
        }
        Linker linker = Linker.nativeLinker();
        for (Map.Entry<String, FunctionDescriptor> e : FfmCudaDriver.SYMBOLS.entrySet()) {
            FunctionDescriptor fd = e.getValue();
            MethodType type = fd.toMethodType();
            Method impl = impls.get(e.getKey().replace("_v2", ""));
            MethodHandle target = impl != null ? MethodHandles.lookup().unreflect(impl)
                    : MethodHandles.dropArguments(MethodHandles.constant(int.class, 0), 0, type.parameterList());
            stubs.put(e.getKey(), linker.upcallStub(target, fd, arena));
        }
        SymbolLookup lookup = name -> Optional.ofNullable(stubs.get(name));
        driver = FfmCudaDriver.bind(lookup);
    }

    @AfterAll
    static void closeArena() {
        arena.close();
    }

    // ---- the fake libcuda: static methods named after the API (without _v2) ----

    static int cuDriverGetVersion(MemorySegment out) {
        out.reinterpret(4).set(JAVA_INT, 0, 12080);
        return 0;
    }

    static int cuGetErrorName(int code, MemorySegment out) {
        out.reinterpret(8).set(ADDRESS, 0, arena.allocateFrom("FAKE_NAME_" + code));
        return code == 4242 ? 1 : 0;
    }

    static int cuGetErrorString(int code, MemorySegment out) {
        out.reinterpret(8).set(ADDRESS, 0, arena.allocateFrom("fake description " + code));
        return 0;
    }

    static int cuDeviceGetName(MemorySegment name, int len, int device) {
        name.reinterpret(len).setString(0, "Fake H200 #" + device);
        return 0;
    }

    static int cuMemAlloc(MemorySegment out, long bytes) {
        out.reinterpret(8).set(JAVA_LONG, 0, 0xD000_0000L + bytes);
        return 0;
    }

    static int cuMemFree(long pointer) {
        lastFreed = pointer;
        return pointer == 0xBADL ? 1 : 0;
    }

    static volatile byte[] lastIpcHandle;
    static volatile int lastIpcFlags;
    static volatile long lastIpcClosed;

    /** Receives the handle struct by value, as the ABI passes it, and answers a pointer made from its first bytes. */
    static int cuIpcOpenMemHandle(MemorySegment out, MemorySegment handle, int flags) {
        lastIpcHandle = handle.toArray(JAVA_BYTE);
        lastIpcFlags = flags;
        out.reinterpret(8).set(JAVA_LONG, 0, 0xE000_0000L + (handle.get(JAVA_BYTE, 0) & 0xff));
        return handle.get(JAVA_BYTE, 1) == 0x7f ? 400 : 0;
    }

    /** Fills the 64-byte handle struct the caller passes by address with bytes made from the pointer. */
    static int cuIpcGetMemHandle(MemorySegment handle, long pointer) {
        MemorySegment h = handle.reinterpret(CudaDriver.IPC_HANDLE_BYTES);
        for (int i = 0; i < CudaDriver.IPC_HANDLE_BYTES; i++) {
            h.set(JAVA_BYTE, i, (byte) (pointer + i));
        }
        return pointer == 0xBADL ? 1 : 0;
    }

    static int cuIpcCloseMemHandle(long pointer) {
        lastIpcClosed = pointer;
        return 0;
    }

    static int cuMemGetInfo(MemorySegment free, MemorySegment total) {
        free.reinterpret(8).set(JAVA_LONG, 0, 100L << 30);
        total.reinterpret(8).set(JAVA_LONG, 0, 141L << 30);
        return 0;
    }

    static int cuModuleLoadDataEx(MemorySegment out, MemorySegment image, int count, MemorySegment options, MemorySegment values) {
        lastImage = image.reinterpret(1 << 16).getString(0);
        MemorySegment opts = options.reinterpret(4L * count);
        MemorySegment vals = values.reinterpret(8L * count);
        if (count != 2 || opts.get(JAVA_INT, 0) != 5 || opts.get(JAVA_INT, 4) != 6) {
            return 1;
        }
        long size = vals.get(ADDRESS, 8).address();
        vals.get(ADDRESS, 0).reinterpret(size).setString(0, "ptxas fatal: unexpected token at line 3");
        return lastImage.contains("broken") ? 218 : 0;
    }

    static int cuLaunchKernel(MemorySegment f, int gx, int gy, int gz, int bx, int by, int bz, int shared, MemorySegment stream,
            MemorySegment params, MemorySegment extra) {
        LAUNCH.clear();
        LAUNCH.addAll(List.of(f.address(), gx, gy, gz, bx, by, bz, shared, stream.address(), extra.address()));
        MemorySegment p = params.reinterpret(8 * 5);
        LAUNCH.add(p.get(ADDRESS, 0).reinterpret(4).get(JAVA_INT, 0));
        LAUNCH.add(p.get(ADDRESS, 8).reinterpret(4).get(JAVA_FLOAT, 0));
        LAUNCH.add(p.get(ADDRESS, 16).reinterpret(8).get(JAVA_LONG, 0));
        LAUNCH.add(p.get(ADDRESS, 24).reinterpret(8).get(JAVA_LONG, 0));
        LAUNCH.add(p.get(ADDRESS, 32).reinterpret(8).get(JAVA_DOUBLE, 0));
        return 0;
    }

    static int cuInit(int flags) {
        return flags == 0 ? 100 : 1; // no device
    }

    // ---- tests ----

    @Test
    void symbols_everyDescriptor_matchesTheCudaHeaderPrototype() throws IOException {
        assumeTrue(Files.exists(CUDA_H), "needs CUDA's cuda.h (nvcc toolkit) to compare with");
        String header = Files.readString(CUDA_H);
        for (Map.Entry<String, FunctionDescriptor> e : FfmCudaDriver.SYMBOLS.entrySet()) {
            String symbol = e.getKey();
            String api = symbol.replace("_v2", "");
            if (!symbol.equals(api)) {
                assertTrue(Pattern.compile("#define\\s+" + api + "\\s+(__CUDA_API_PT(SZ|DS)\\()?" + symbol + "\\b").matcher(header).find(),
                        () -> "cuda.h does not map " + api + " to " + symbol);
            }
            Matcher m = Pattern.compile("CUresult CUDAAPI " + api + "\\(([^)]*)\\)").matcher(header);
            assertTrue(m.find(), () -> "no prototype for " + api);
            List<MemoryLayout> expected = new ArrayList<>();
            String params = m.group(1).strip();
            if (!params.equals("void")) {
                for (String p : params.split(",")) {
                    expected.add(layoutOf(p.strip()));
                }
            }
            List<MemoryLayout> actual = e.getValue().argumentLayouts().stream().map(MemoryLayout::withoutName).toList();
            assertEquals(expected, actual, () -> symbol + " descriptor differs from cuda.h: " + m.group(1));
            assertEquals(Optional.of(JAVA_INT), e.getValue().returnLayout(), symbol + " returns CUresult");
        }
    }

    private static MemoryLayout layoutOf(String param) {
        if (param.startsWith("CUipcMemHandle ") && !param.contains("*")) {
            return FfmCudaDriver.IPC_HANDLE;
        }
        if (param.contains("*")) {
            return ADDRESS;
        }
        String type = param.substring(0, param.lastIndexOf(' ')).replace("const ", "").strip();
        if (Set.of("size_t", "CUdeviceptr").contains(type)) {
            return JAVA_LONG;
        }
        if (Set.of("CUstream", "CUcontext", "CUmodule", "CUfunction").contains(type)) {
            return ADDRESS;
        }
        return JAVA_INT; // int, unsigned int, CUdevice, CUresult and enums
    }

    @Test
    void bind_missingSymbols_namesEveryOne() {
        SymbolLookup onlyInit = name -> name.equals("cuInit") ? Optional.of(MemorySegment.ofAddress(0x1000)) : Optional.empty();
        var e = assertThrows(FfmCudaDriver.MissingSymbolsException.class, () -> FfmCudaDriver.bind(onlyInit));
        assertTrue(e.getMessage().contains("cuLaunchKernel") && e.getMessage().contains("cuMemAlloc_v2"), e.getMessage());
        assertTrue(e.getMessage().contains("CUDA 11.0 or newer"), e.getMessage());
    }

    @Test
    void outParameters_travelThroughTheAbi() {
        assertEquals(12080, driver.driverVersion());
        assertEquals("Fake H200 #3", driver.deviceName(3));
        assertEquals(0xD000_0000L + 4096, driver.memAlloc(4096));
        CudaDriver.MemInfo info = driver.memGetInfo();
        assertEquals(100L << 30, info.free());
        assertEquals(141L << 30, info.total());
    }

    @Test
    void failure_usesTheDriversErrorNameAndString() {
        CudaException e = assertThrows(CudaException.class, () -> driver.memFree(0xBADL));
        assertEquals(0xBADL, lastFreed);
        assertEquals("cuMemFree_v2 failed: FAKE_NAME_1 (1): fake description 1", e.getMessage());
        CudaException init = assertThrows(CudaException.class, driver::init);
        assertEquals(100, init.result());
    }

    @Test
    void errorName_driverRefuses_returnsNull() {
        assertNull(driver.nameOf(4242));
        assertEquals("FAKE_NAME_7", driver.nameOf(7));
    }

    @Test
    void moduleLoad_passesNulTerminatedImage_andReportsJitLog() {
        assertEquals(0L, driver.moduleLoadData("//ok\n.version 7.0".getBytes()));
        assertEquals("//ok\n.version 7.0", lastImage);
        CudaException e = assertThrows(CudaException.class, () -> driver.moduleLoadData("broken ptx".getBytes()));
        assertEquals(218, e.result());
        assertTrue(e.getMessage().endsWith("; JIT log: ptxas fatal: unexpected token at line 3"), e.getMessage());
    }

    @Test
    void launch_passesGridBlockStreamAndEveryArgumentByAddress() {
        driver.launchKernel(0xF00L, 40, 256, 0x5700L, List.of(new KernelArg.Int32(7), new KernelArg.Float32(2.5f),
                new KernelArg.Pointer(0x1234_5678L), new KernelArg.Int64(1L << 40), new KernelArg.Float64(0.25)));
        assertEquals(List.of(0xF00L, 40, 1, 1, 256, 1, 1, 0, 0x5700L, 0L, 7, 2.5f, 0x1234_5678L, 1L << 40, 0.25), LAUNCH);
    }

    @Test
    void ipcGet_fillsThe64ByteHandleThroughItsAddress() {
        byte[] h = driver.ipcGetMemHandle(0x40L);
        assertEquals(CudaDriver.IPC_HANDLE_BYTES, h.length);
        for (int i = 0; i < h.length; i++) {
            assertEquals((byte) (0x40 + i), h[i], "byte " + i);
        }
        CudaException e = assertThrows(CudaException.class, () -> driver.ipcGetMemHandle(0xBADL));
        assertTrue(e.getMessage().contains("cuIpcGetMemHandle"), e.getMessage());
    }

    @Test
    void ipcOpen_passesThe64ByteHandleByValue_andTheLazyPeerFlag() {
        byte[] h = new byte[CudaDriver.IPC_HANDLE_BYTES];
        for (int i = 0; i < h.length; i++) {
            h[i] = (byte) (i + 3);
        }
        assertEquals(0xE000_0003L, driver.ipcOpenMemHandle(h));
        assertArrayEquals(h, lastIpcHandle);
        assertEquals(1, lastIpcFlags);
        driver.ipcCloseMemHandle(0xE000_0003L);
        assertEquals(0xE000_0003L, lastIpcClosed);
        h[1] = 0x7f;
        CudaException e = assertThrows(CudaException.class, () -> driver.ipcOpenMemHandle(h));
        assertTrue(e.getMessage().contains("cuIpcOpenMemHandle_v2"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> driver.ipcOpenMemHandle(new byte[63]));
    }

    @Test
    void asyncCopy_heapMemory_isRejectedBeforeTheDriverSeesIt() {
        var e = assertThrows(IllegalArgumentException.class,
                () -> driver.memcpyHtoDAsync(0x1000, MemorySegment.ofArray(new byte[16]), 16, 0));
        assertTrue(e.getMessage().contains("pinned"), e.getMessage());
        assertNotNull(driver);
    }

    @Test
    void probe_boundDriverWithoutDevice_reportsNoDeviceByName() {
        CudaLibrary.Status s = CudaLibrary.probe("fake", driver);
        assertTrue(s.problem().contains("sees no CUDA device") && s.problem().contains("FAKE_NAME_100"), s.problem());
        assertEquals(12080, s.driverVersion());
    }
}
