package io.backplane.backend.cuda;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.MemoryType;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.TensorConfig;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One model instance: a stream on its GPU, device buffers for the batch's tensors and a pinned
 * staging buffer, all grown on demand and kept between batches (so a steady load allocates
 * nothing), all freed at {@link #close}.
 *
 * <p>A batch runs as: answer cancelled and malformed requests on their own; gather the rest's
 * inputs into pinned staging (or device-to-device for inputs already on this GPU); copy them to
 * the device asynchronously on the stream; launch with a grid covering the batch's elements; copy
 * the outputs back; synchronize once; answer each request with its slice. A CUDA error fails the
 * batch (the core answers the open requests); a sticky one also makes every instance on the GPU
 * report failure so that the core recreates them.
 */
final class CudaInstance implements ModelInstance {
    private static final Logger LOG = LoggerFactory.getLogger(CudaInstance.class);

    private final CudaModel model;
    private final InstanceContext context;
    private final CudaModel.DeviceModule module;
    private final DeviceContext device;
    private final CudaDriver driver;
    private final LaunchSpec spec;
    private final String owner;
    private final long stream;
    private final Map<String, DeviceMemoryPool.DeviceBuffer> buffers = new HashMap<>();
    private DeviceMemoryPool.PinnedBuffer staging;
    private final AtomicBoolean closed = new AtomicBoolean();
    private final Object lifecycle = new Object();
    private boolean executing; // guarded by lifecycle
    private final AtomicBoolean failed = new AtomicBoolean();

    CudaInstance(CudaModel model, InstanceContext context, CudaModel.DeviceModule module) {
        this.model = model;
        this.context = context;
        this.module = module;
        this.device = module.device();
        this.driver = device.driver();
        this.spec = model.spec();
        this.owner = model.owner() + " instance " + context.name();
        try (DeviceContext.Scope _ = device.enter()) {
            this.stream = driver.streamCreate();
        }
        device.register(this);
    }

    int deviceOrdinal() {
        return device.ordinal();
    }

    @Override
    public boolean isReady() {
        return !closed.get() && !failed.get() && device.fault() == null && module.generation() == device.generation();
    }

    /** Tells the core this instance cannot serve any more; once. */
    void reportFailure(Throwable cause) {
        if (failed.compareAndSet(false, true)) {
            LOG.warn("{} on GPU {} failed and will be recreated: {}", owner, device.ordinal(), cause.getMessage());
            context.reportFailure(cause);
        }
    }

    @Override
    public void execute(List<ScheduledRequest> batch) {
        synchronized (lifecycle) {
            if (closed.get()) {
                throw BackplaneException.unavailable(owner + " is closed");
            }
            executing = true;
        }
        try {
            executeBatch(batch);
        } finally {
            boolean release;
            synchronized (lifecycle) {
                executing = false;
                release = closed.get();
            }
            if (release) {
                LOG.info("{}: the execution abandoned at close returned; freeing its GPU memory now", owner);
                release();
            }
        }
    }

    private void executeBatch(List<ScheduledRequest> batch) {
        CudaException fault = device.fault();
        if (fault != null || module.generation() != device.generation()) {
            BackplaneException e = BackplaneException.unavailable(owner + ": GPU " + device.ordinal() + " hit "
                    + (fault != null ? fault.getMessage() : "a context reset") + "; the instance is being recreated");
            reportFailure(e);
            throw e;
        }
        List<ScheduledRequest> live = new ArrayList<>(batch.size());
        for (ScheduledRequest r : batch) {
            if (r.sender().isClosed()) {
                continue;
            }
            if (r.isCancelled()) {
                answer(r, InferenceResponse.error(new BackplaneException(ErrorCode.CANCELLED, "request " + r.id() + " was cancelled")));
                continue;
            }
            String problem = check(r);
            if (problem != null) {
                answer(r, InferenceResponse.error(BackplaneException.invalid(problem)));
                continue;
            }
            live.add(r);
        }
        if (live.isEmpty()) {
            return;
        }
        try (DeviceContext.Scope _ = device.enter()) {
            run(live);
        } catch (BackplaneException e) {
            if (e.code() == ErrorCode.RESOURCE_EXHAUSTED) {
                releaseBuffers(); // a batch too big for the memory left must not keep half its buffers
            }
            if (!(e instanceof CudaException c)) {
                throw e;
            }
            if (c.isSticky()) {
                device.markFaulted(c);
            } else {
                drain();
            }
            throw new BackplaneException(c.code(), owner + " on GPU " + device.ordinal() + ": " + c.getMessage(), c);
        }
    }

    private void releaseBuffers() {
        buffers.values().forEach(DeviceMemoryPool.DeviceBuffer::close);
        buffers.clear();
        if (staging != null) {
            staging.close();
            staging = null;
        }
    }

    /** Why request {@code r} cannot join the batch, or null. */
    private String check(ScheduledRequest r) {
        long[] shape = null;
        String reference = null;
        for (TensorConfig in : spec.inputs()) {
            Tensor t = r.request().input(in.name());
            if (t == null) {
                return "request " + r.id() + " to " + model.owner() + " has no input '" + in.name() + "'";
            }
            if (t.dataType() != in.dataType()) {
                return "input '" + in.name() + "' is " + t.dataType() + " but the model declares " + in.dataType();
            }
            if (t.memoryType() == MemoryType.GPU && t.deviceId() != device.ordinal()) {
                return "input '" + in.name() + "' is in the memory of GPU " + t.deviceId() + " but " + owner + " runs on GPU "
                        + device.ordinal() + "; copy it to host memory or to GPU " + device.ordinal();
            }
            if (shape == null) {
                shape = t.shape();
                reference = in.name();
            } else if (!Arrays.equals(shape, t.shape())) {
                return "input '" + in.name() + "' has shape " + Arrays.toString(t.shape()) + " but '" + reference + "' has "
                        + Arrays.toString(shape) + "; the kernel is element-wise, so every input needs the same shape";
            }
        }
        return null;
    }

    private void run(List<ScheduledRequest> live) {
        long[] counts = new long[live.size()];
        long total = 0;
        for (int i = 0; i < live.size(); i++) {
            counts[i] = live.get(i).request().input(spec.inputs().getFirst().name()).elementCount();
            total += counts[i];
        }
        if (total == 0) {
            for (ScheduledRequest r : live) {
                answer(r, InferenceResponse.of(emptyOutputs(r)));
            }
            return;
        }
        long grid = (total + spec.blockSize() - 1) / spec.blockSize();
        boolean narrowCount = spec.args().stream().anyMatch(a -> a instanceof LaunchSpec.CountArg c && !c.wide());
        if (grid > Integer.MAX_VALUE || (narrowCount && total > Integer.MAX_VALUE)) {
            throw BackplaneException.invalid(owner + ": the batch has " + total + " elements, more than one launch of this kernel can take"
                    + (narrowCount ? " with an int32 count (use count:int64)" : ""));
        }

        // Staging layout: every staged input, then every output.
        long stagingBytes = 0;
        for (TensorConfig t : spec.inputs()) {
            stagingBytes += total * t.dataType().byteSize();
        }
        long outputsAt = stagingBytes;
        for (TensorConfig t : spec.outputs()) {
            stagingBytes += total * t.dataType().byteSize();
        }
        MemorySegment pinned = staging(stagingBytes);

        Map<String, Long> pointers = new HashMap<>();
        long stagedAt = 0;
        for (TensorConfig in : spec.inputs()) {
            int elem = in.dataType().byteSize();
            long bytes = total * elem;
            Tensor only = live.size() == 1 ? live.getFirst().request().input(in.name()) : null;
            if (only != null && only.memoryType() == MemoryType.GPU) {
                pointers.put(in.name(), only.data().address()); // already on this GPU: no copy at all
                stagedAt += bytes;
                continue;
            }
            long dst = buffer(in.name(), bytes).pointer();
            pointers.put(in.name(), dst);
            long offset = 0;
            long hostRunStart = -1;
            for (int i = 0; i < live.size(); i++) {
                Tensor t = live.get(i).request().input(in.name());
                long size = counts[i] * elem;
                if (t.memoryType() == MemoryType.GPU) {
                    flushHostRun(pinned, stagedAt, hostRunStart, offset, dst);
                    hostRunStart = -1;
                    if (size > 0) {
                        driver.memcpyDtoDAsync(dst + offset, t.data().address(), size, stream);
                    }
                } else {
                    if (hostRunStart < 0) {
                        hostRunStart = offset;
                    }
                    MemorySegment.copy(t.data(), 0, pinned, stagedAt + offset, size);
                }
                offset += size;
            }
            flushHostRun(pinned, stagedAt, hostRunStart, offset, dst);
            stagedAt += bytes;
        }
        for (TensorConfig out : spec.outputs()) {
            pointers.put(out.name(), buffer(out.name(), total * out.dataType().byteSize()).pointer());
        }

        List<KernelArg> args = new ArrayList<>(spec.args().size());
        for (LaunchSpec.Arg a : spec.args()) {
            args.add(switch (a) {
                case LaunchSpec.InputArg in -> new KernelArg.Pointer(pointers.get(in.name()));
                case LaunchSpec.OutputArg out -> new KernelArg.Pointer(pointers.get(out.name()));
                case LaunchSpec.CountArg c -> c.wide() ? new KernelArg.Int64(total) : new KernelArg.Int32((int) total);
                case LaunchSpec.ScalarArg sc -> sc.value();
            });
        }
        driver.launchKernel(module.function(), (int) grid, spec.blockSize(), stream, args);

        long readAt = outputsAt;
        for (TensorConfig out : spec.outputs()) {
            long bytes = total * out.dataType().byteSize();
            driver.memcpyDtoHAsync(pinned.asSlice(readAt, bytes), pointers.get(out.name()), bytes, stream);
            readAt += bytes;
        }
        driver.streamSynchronize(stream);

        long[] offsets = new long[spec.outputs().size()];
        long base = outputsAt;
        for (int o = 0; o < offsets.length; o++) {
            offsets[o] = base;
            base += total * spec.outputs().get(o).dataType().byteSize();
        }
        for (int i = 0; i < live.size(); i++) {
            ScheduledRequest r = live.get(i);
            long[] shape = r.request().input(spec.inputs().getFirst().name()).shape();
            List<Tensor> outputs = new ArrayList<>(offsets.length);
            for (int o = 0; o < offsets.length; o++) {
                TensorConfig out = spec.outputs().get(o);
                long size = counts[i] * out.dataType().byteSize();
                if (wanted(r, out.name())) {
                    byte[] copy = pinned.asSlice(offsets[o], size).toArray(ValueLayout.JAVA_BYTE);
                    outputs.add(Tensor.of(out.name(), out.dataType(), shape, MemorySegment.ofArray(copy)));
                }
                offsets[o] += size;
            }
            answer(r, InferenceResponse.of(outputs));
        }
    }

    private void flushHostRun(MemorySegment pinned, long stagedAt, long runStart, long runEnd, long dst) {
        if (runStart >= 0 && runEnd > runStart) {
            driver.memcpyHtoDAsync(dst + runStart, pinned.asSlice(stagedAt + runStart, runEnd - runStart), runEnd - runStart, stream);
        }
    }

    private List<Tensor> emptyOutputs(ScheduledRequest r) {
        long[] shape = r.request().input(spec.inputs().getFirst().name()).shape();
        List<Tensor> out = new ArrayList<>();
        for (TensorConfig t : spec.outputs()) {
            if (wanted(r, t.name())) {
                out.add(Tensor.of(t.name(), t.dataType(), shape, MemorySegment.ofArray(new byte[0])));
            }
        }
        return out;
    }

    private static boolean wanted(ScheduledRequest r, String output) {
        List<String> requested = r.request().requestedOutputs();
        return requested.isEmpty() || requested.contains(output);
    }

    /** The device buffer for tensor {@code name}, at least {@code bytes}; grows by doubling. */
    private DeviceMemoryPool.DeviceBuffer buffer(String name, long bytes) {
        DeviceMemoryPool.DeviceBuffer b = buffers.get(name);
        if (b != null && b.size() >= bytes) {
            return b;
        }
        long size = Math.max(bytes, b == null ? 0 : Math.min(b.size() * 2, b.size() + (1L << 30)));
        if (b != null) {
            b.close();
            buffers.remove(name);
        }
        DeviceMemoryPool.DeviceBuffer fresh = device.pool().allocate(size, owner);
        buffers.put(name, fresh);
        return fresh;
    }

    private MemorySegment staging(long bytes) {
        if (staging != null && staging.size() >= bytes) {
            return staging.segment();
        }
        long size = Math.max(bytes, staging == null ? 0 : Math.min(staging.size() * 2, staging.size() + (1L << 30)));
        if (staging != null) {
            staging.close();
            staging = null;
        }
        staging = device.pool().allocatePinned(size, owner);
        return staging.segment();
    }

    /** After a non-sticky error: waits for whatever the stream still runs, so buffers are quiet before reuse. */
    private void drain() {
        try {
            driver.streamSynchronize(stream);
        } catch (CudaException e) {
            LOG.debug("{}: draining the stream after an error failed too: {}", owner, e.getMessage());
            if (e.isSticky()) {
                device.markFaulted(e);
            }
        }
    }

    private void answer(ScheduledRequest r, InferenceResponse response) {
        try {
            r.sender().send(response, io.backplane.spi.ResponseSender.FINAL);
        } catch (IllegalStateException e) {
            LOG.debug("{}: request {} ended before its answer: {}", owner, r.id(), e.getMessage());
        }
    }

    /**
     * Frees the stream and buffers, or, when an abandoned execution is still running on another
     * thread (the core closes an instance at the unload deadline), leaves them to that execution
     * to free when it returns: memory a running copy or kernel may still touch is never freed
     * under it.
     */
    @Override
    public void close() {
        boolean now;
        synchronized (lifecycle) {
            if (!closed.compareAndSet(false, true)) {
                return;
            }
            now = !executing;
        }
        if (now) {
            release();
        } else {
            LOG.warn("{}: closed while a batch still executes; its GPU memory is kept until that execution returns", owner);
        }
    }

    private void release() {
        try {
            if (module.generation() == device.generation() && device.fault() == null && !device.isClosed()) {
                try (DeviceContext.Scope _ = device.enter()) {
                    driver.streamSynchronize(stream);
                    driver.streamDestroy(stream);
                } catch (CudaException e) {
                    LOG.warn("{}: destroying its stream failed: {}", owner, e.getMessage());
                }
            }
        } finally {
            releaseBuffers();
            device.unregister(this);
        }
    }
}
