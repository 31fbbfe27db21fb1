package io.backplane.backend.cuda;

import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * The part of the CUDA driver API that this backend uses, one method per driver function.
 * Every method throws {@link CudaException} (named result code and the failed call) when the
 * driver returns anything but {@code CUDA_SUCCESS}.
 *
 * <p>{@link FfmCudaDriver} binds the real {@code libcuda.so.1} through the foreign function and
 * memory API; tests use an in-memory fake. Handles ({@code CUcontext}, {@code CUstream},
 * {@code CUmodule}, {@code CUfunction}) and device pointers ({@code CUdeviceptr}) are opaque
 * {@code long}s; {@code CUdevice} is an {@code int}. Host memory is a {@link MemorySegment}, and
 * must be native (pinned memory from {@link #memHostAlloc}) for the asynchronous copies.
 *
 * <p>Context rules are CUDA's: calls other than {@code init}, version, device and primary-context
 * queries need a current context on the calling thread ({@link #contextPush}). Implementations
 * are thread-safe in the sense the driver is.
 */
public interface CudaDriver {
    /** {@code CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK}. */
    int ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1;
    /** {@code CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR}. */
    int ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
    /** {@code CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR}. */
    int ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
    /** {@code CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK}. */
    int FUNCTION_MAX_THREADS_PER_BLOCK = 0;

    /** {@code cuDriverGetVersion}: e.g. 13000 for CUDA 13.0. Needs no {@code cuInit}. */
    int driverVersion();

    /** {@code cuInit(0)}. */
    void init();

    /** {@code cuDeviceGetCount}. */
    int deviceCount();

    /** {@code cuDeviceGet}: the device handle for an ordinal. */
    int device(int ordinal);

    /** {@code cuDeviceGetName}. */
    String deviceName(int device);

    /** {@code cuDeviceGetAttribute}. */
    int deviceAttribute(int attribute, int device);

    /** {@code cuDeviceTotalMem_v2}. */
    long deviceTotalMemory(int device);

    /** {@code cuDevicePrimaryCtxRetain}: the device's primary context, one reference more. */
    long primaryContextRetain(int device);

    /** {@code cuDevicePrimaryCtxRelease_v2}: one reference less. */
    void primaryContextRelease(int device);

    /** {@code cuDevicePrimaryCtxReset_v2}: destroys every allocation and module of the primary context. */
    void primaryContextReset(int device);

    /** {@code cuCtxPushCurrent_v2}. */
    void contextPush(long context);

    /** {@code cuCtxPopCurrent_v2}: returns the context popped. */
    long contextPop();

    /** {@code cuStreamCreate} with {@code CU_STREAM_NON_BLOCKING}. */
    long streamCreate();

    /** {@code cuStreamDestroy_v2}. */
    void streamDestroy(long stream);

    /** {@code cuStreamSynchronize}: waits for the stream; reports errors of its earlier asynchronous work. */
    void streamSynchronize(long stream);

    /** {@code cuMemAlloc_v2}. */
    long memAlloc(long bytes);

    /** {@code cuMemFree_v2}. */
    void memFree(long devicePointer);

    /** {@code cuMemHostAlloc} (portable): page-locked host memory of {@code bytes}. */
    MemorySegment memHostAlloc(long bytes);

    /** {@code cuMemFreeHost}. */
    void memFreeHost(MemorySegment pinned);

    /** {@code cuMemcpyHtoDAsync_v2}. */
    void memcpyHtoDAsync(long dst, MemorySegment src, long bytes, long stream);

    /** {@code cuMemcpyDtoHAsync_v2}. */
    void memcpyDtoHAsync(MemorySegment dst, long src, long bytes, long stream);

    /** {@code cuMemcpyDtoDAsync_v2}. */
    void memcpyDtoDAsync(long dst, long src, long bytes, long stream);

    /** {@code cuMemcpyHtoD_v2}: a synchronous copy from native host memory to the device. */
    void memcpyHtoD(long dst, MemorySegment src, long bytes);

    /** {@code cuMemcpyDtoH_v2}: a synchronous copy from the device into native host memory. */
    void memcpyDtoH(MemorySegment dst, long src, long bytes);

    /** Bytes of a {@code CUipcMemHandle} ({@code cudaIpcMemHandle_t}): {@code CU_IPC_HANDLE_SIZE}. */
    int IPC_HANDLE_BYTES = 64;

    /**
     * {@code cuIpcGetMemHandle}: the {@link #IPC_HANDLE_BYTES} bytes another process opens with
     * {@link #ipcOpenMemHandle} to map this allocation (from {@link #memAlloc}) into its own context:
     * what a client of Triton's {@code cudasharedmemory} extension sends as {@code raw_handle}.
     */
    byte[] ipcGetMemHandle(long devicePointer);

    /**
     * {@code cuIpcOpenMemHandle_v2} with {@code CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS}: maps another
     * process's allocation into the current context and returns its device pointer. Each pointer
     * opened must be closed exactly once ({@link #ipcCloseMemHandle}).
     *
     * @param handle the {@link #IPC_HANDLE_BYTES} bytes of the exporting process's handle
     */
    long ipcOpenMemHandle(byte[] handle);

    /** {@code cuIpcCloseMemHandle}: unmaps a pointer from {@link #ipcOpenMemHandle}. */
    void ipcCloseMemHandle(long devicePointer);

    /** {@code cuMemGetInfo_v2}: free and total bytes of the current context's device. */
    MemInfo memGetInfo();

    /**
     * {@code cuModuleLoadDataEx}: loads a PTX (NUL-terminated by the implementation) or cubin
     * image; on failure the exception message carries the JIT error log.
     */
    long moduleLoadData(byte[] image);

    /** {@code cuModuleUnload}. */
    void moduleUnload(long module);

    /** {@code cuModuleGetFunction}; CUDA_ERROR_NOT_FOUND (500) when the module has no such entry. */
    long moduleGetFunction(long module, String name);

    /** {@code cuFuncGetAttribute}. */
    int functionAttribute(int attribute, long function);

    /** {@code cuLaunchKernel} with a 1-D grid and block, no dynamic shared memory. */
    void launchKernel(long function, int gridX, int blockX, long stream, List<KernelArg> args);

    /** Free and total device memory in bytes. */
    record MemInfo(long free, long total) {
    }
}
