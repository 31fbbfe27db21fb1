package io.backplane.backend.python;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.MemoryType;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.host.RequestHandle;
import io.backplane.spi.host.ResponseObserver;
import io.backplane.spi.metrics.Metric;
import io.backplane.spi.metrics.MetricFamily;
import io.backplane.spi.metrics.MetricKind;
import io.backplane.spi.metrics.MetricRegistry;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The host's side of BLS calls and custom metrics for one stub generation (see
 * {@code backplane_bls.py}). A BLS frame names the execution and request it was made for; the
 * call becomes a child request of that request ({@link ScheduledRequest#startChild}), so the core
 * cancels it when the request ends. Inputs are read from the stub's chunks and acknowledged at
 * once; each response's outputs are written into host chunks that stay allocated until the stub
 * sends HOST_FREE or the region closes. Metric handles live until the stub deletes them or exits.
 */
final class BlsBridge {
    private static final Logger log = LoggerFactory.getLogger(BlsBridge.class);
    private static final DataType[] TYPES = DataType.values();
    private static final MetricKind[] KINDS = MetricKind.values();

    /** What the bridge needs from its stub connection. */
    interface Link {
        /** The open request {@code index} of execution {@code execId}, or null when it ended or is unknown. */
        @Nullable ScheduledRequest openRequest(long execId, int index);

        /** Runs {@code body} with the live region (under the region's read lock); false when the stub is gone. */
        boolean withRegion(java.util.function.Consumer<SharedRegion> body);

        void send(byte type, byte[] payload);

        String describe();
    }

    private final Link link;
    private final @Nullable MetricRegistry metrics;
    private final Map<Long, Call> calls = new ConcurrentHashMap<>();
    private final Map<Long, List<SharedRegion.Block>> held = new ConcurrentHashMap<>();
    private final Map<Long, AutoCloseable> metricHandles = new ConcurrentHashMap<>();
    private final AtomicLong tokens = new AtomicLong();
    private final AtomicLong handles = new AtomicLong();

    BlsBridge(Link link, @Nullable MetricRegistry metrics) {
        this.link = link;
        this.metrics = metrics;
    }

    /** Open BLS calls (tests). */
    int openCalls() {
        return calls.size();
    }

    void onFrame(byte type, MemorySegment payload) {
        switch (type) {
            case Wire.F_BLS -> onCall(payload);
            case Wire.F_BLS_CANCEL -> {
                Call c = calls.get(new Wire.In(payload).u64());
                RequestHandle h = c == null ? null : c.handle;
                if (h != null) {
                    h.cancel();
                }
            }
            case Wire.F_HOST_FREE -> {
                List<SharedRegion.Block> blocks = held.remove(new Wire.In(payload).u64());
                if (blocks != null) {
                    link.withRegion(reg -> blocks.forEach(reg::free));
                }
            }
            case Wire.F_METRIC -> onMetric(payload);
            default -> throw Wire.protocol("unexpected frame type " + type);
        }
    }

    // ------------------------------------------------------------------ BLS

    private void onCall(MemorySegment payload) {
        Wire.In in = new Wire.In(payload);
        long callId = in.u64();
        long execId = in.u64();
        int index = in.u16();
        in.u8(); // decoupled: the host streams every response either way
        String model = in.str();
        long version = in.u64();
        String requestId = in.str();
        String correlationId = in.str();
        String params = in.str();
        long timeoutMicros = in.u64();
        List<String> requested = new ArrayList<>();
        for (int i = in.u16(); i > 0; i--) {
            requested.add(in.str());
        }
        int nin = in.u16();
        List<Tensor> inputs = new ArrayList<>(nin);
        long[][] spans = new long[nin][];
        String[] names = new String[nin];
        int[] codes = new int[nin];
        long[][] shapes = new long[nin][];
        for (int i = 0; i < nin; i++) {
            names[i] = in.str();
            codes[i] = in.u8();
            int ndim = in.u8();
            shapes[i] = new long[ndim];
            for (int d = 0; d < ndim; d++) {
                shapes[i][d] = in.u64();
            }
            spans[i] = new long[] {in.u32(), in.u64(), in.u64()};
            if (codes[i] >= TYPES.length) {
                throw Wire.protocol("BLS input '" + names[i] + "' has datatype code " + codes[i]);
            }
        }
        long token = in.u64();
        BackplaneException[] bad = new BackplaneException[1];
        boolean alive = link.withRegion(reg -> {
            for (int i = 0; i < nin; i++) {
                MemorySegment src = reg.stubSlice(spans[i][0], spans[i][1], spans[i][2]);
                MemorySegment copy = MemorySegment.ofArray(src.toArray(ValueLayout.JAVA_BYTE));
                try {
                    inputs.add(Tensor.of(names[i], TYPES[codes[i]], shapes[i], copy));
                } catch (BackplaneException e) {
                    bad[0] = e;
                    return;
                }
            }
        });
        if (token != 0) {
            link.send(Wire.F_ACK, new Wire.Out(8).u64(token).toByteArray());
        }
        if (!alive) {
            return;
        }
        Call call = new Call(callId);
        if (bad[0] != null) {
            call.onError(bad[0]);
            return;
        }
        ScheduledRequest parent = link.openRequest(execId, index);
        if (parent == null) {
            call.onError(new BackplaneException(ErrorCode.CANCELLED, "BLS call to model '" + model + "' from " + link.describe()
                    + ": the request it was made for has ended"));
            return;
        }
        InferenceRequest request;
        try {
            InferenceRequest.Builder b = InferenceRequest.builder(model).id(requestId).timeoutMicros(timeoutMicros);
            Wire.sequence(b, correlationId);
            if (version > 0) {
                b.version(version);
            }
            inputs.forEach(b::input);
            requested.forEach(b::requestOutput);
            FlatJson.parse(params).forEach(b::parameter);
            request = b.build();
        } catch (BackplaneException e) {
            call.onError(e);
            return;
        }
        calls.put(callId, call);
        try {
            call.handle = parent.startChild(request, call);
        } catch (IllegalStateException e) {
            call.onError(new BackplaneException(ErrorCode.CANCELLED, "BLS call to model '" + model + "': " + e.getMessage()));
        } catch (UnsupportedOperationException e) {
            call.onError(new BackplaneException(ErrorCode.UNSUPPORTED, "BLS call to model '" + model + "': " + e.getMessage()));
        } catch (RuntimeException e) {
            call.onError(BackplaneException.wrap(e, "BLS call to model '" + model + "' failed"));
        }
    }

    /** One BLS call's observer: forwards each response to the stub. */
    private final class Call implements ResponseObserver {
        final long id;
        volatile @Nullable RequestHandle handle;

        Call(long id) {
            this.id = id;
        }

        @Override
        public void onResponse(InferenceResponse response) {
            forward(id, false, response);
        }

        @Override
        public void onComplete() {
            calls.remove(id);
            forward(id, true, null);
        }

        @Override
        public void onError(BackplaneException error) {
            calls.remove(id);
            forward(id, true, InferenceResponse.error(error));
        }
    }

    private void forward(long callId, boolean fin, @Nullable InferenceResponse response) {
        Wire.Out out = new Wire.Out(128);
        out.u64(callId).u8(fin ? 1 : 0).u8(response == null ? 0 : 1);
        List<SharedRegion.Block> blocks = new ArrayList<>();
        boolean alive = link.withRegion(reg -> {
            if (response != null) {
                encode(reg, response, out, blocks);
            }
        });
        if (!alive) {
            return;
        }
        long token = 0;
        if (!blocks.isEmpty()) {
            token = tokens.incrementAndGet();
            held.put(token, blocks);
        }
        out.u64(token);
        link.send(Wire.F_BLS_RESP, out.toByteArray());
    }

    private void encode(SharedRegion reg, InferenceResponse response, Wire.Out out, List<SharedRegion.Block> blocks) {
        BackplaneException err = response.error();
        if (err != null) {
            out.u8(1).u8(err.code().ordinal()).str(err.getMessage());
            return;
        }
        Wire.Out body = new Wire.Out(128);
        try {
            body.u16(response.outputs().size());
            for (Tensor t : response.outputs()) {
                if (t.memoryType() == MemoryType.GPU) {
                    throw new BackplaneException(ErrorCode.UNSUPPORTED, "BLS output '" + t.name() + "' is in GPU memory; the python backend takes host tensors");
                }
                body.str(t.name()).u8(t.dataType().ordinal()).u8(t.rank());
                for (int i = 0; i < t.rank(); i++) {
                    body.u64(t.dim(i));
                }
                long n = t.byteSize();
                if (n > 0) {
                    SharedRegion.Block b = reg.allocate(n);
                    blocks.add(b);
                    MemorySegment.copy(t.data(), 0, reg.hostSegment(b), 0, n);
                    body.u32(b.chunk()).u64(b.offset()).u64(n);
                } else {
                    body.u32(0).u64(0).u64(0);
                }
            }
            body.str(Wire.json(response.parameters()));
            out.u8(0);
            out.write(body.buffer(), 0, body.size());
        } catch (RuntimeException e) {
            blocks.forEach(reg::free);
            blocks.clear();
            BackplaneException be = BackplaneException.wrap(e, "BLS response could not be passed to " + link.describe());
            out.u8(1).u8(be.code().ordinal()).str(be.getMessage());
        }
    }

    // ------------------------------------------------------------------ metrics

    private void onMetric(MemorySegment payload) {
        Wire.In in = new Wire.In(payload);
        long callId = in.u64();
        int op = in.u8();
        long handle = 0;
        double value = 0;
        String error = null;
        try {
            MetricRegistry reg = metrics;
            if (reg == null) {
                throw new BackplaneException(ErrorCode.UNSUPPORTED, "this host offers no custom metrics");
            }
            switch (op) {
                case 1 -> {
                    String name = in.str();
                    String description = in.str();
                    int kind = in.u8();
                    if (kind >= KINDS.length) {
                        throw BackplaneException.invalid("metric kind " + kind + " is unknown");
                    }
                    handle = put(reg.family(name, description, KINDS[kind]));
                }
                case 2, 4 -> {
                    AutoCloseable c = metricHandles.remove(in.u64());
                    if (c != null) {
                        c.close();
                    }
                }
                case 3 -> {
                    MetricFamily f = handle(in.u64(), MetricFamily.class);
                    Map<String, String> labels = new LinkedHashMap<>();
                    FlatJson.parse(in.str()).forEach((k, v) -> labels.put(k, String.valueOf(v)));
                    List<Double> buckets = new ArrayList<>();
                    for (int i = in.u16(); i > 0; i--) {
                        buckets.add(Double.longBitsToDouble(in.u64()));
                    }
                    handle = put(f.metric(labels, buckets));
                }
                case 5 -> handle(in.u64(), Metric.class).increment(Double.longBitsToDouble(in.u64()));
                case 6 -> handle(in.u64(), Metric.class).set(Double.longBitsToDouble(in.u64()));
                case 7 -> handle(in.u64(), Metric.class).observe(Double.longBitsToDouble(in.u64()));
                case 8 -> value = handle(in.u64(), Metric.class).value();
                default -> throw Wire.protocol("metric operation " + op + " is unknown");
            }
        } catch (BackplaneException e) {
            error = e.getMessage();
        } catch (Exception e) {
            error = String.valueOf(e.getMessage());
        }
        if (callId == 0) {
            if (error != null) {
                log.debug("{}: metric clean-up failed: {}", link.describe(), error);
            }
            return;
        }
        Wire.Out out = new Wire.Out(32).u64(callId);
        if (error == null) {
            out.u8(1).u64(handle).u64(Double.doubleToRawLongBits(value));
        } else {
            out.u8(0).str(error);
        }
        link.send(Wire.F_METRIC_REPLY, out.toByteArray());
    }

    private long put(AutoCloseable c) {
        long h = handles.incrementAndGet();
        metricHandles.put(h, c);
        return h;
    }

    private <T> T handle(long h, Class<T> type) {
        AutoCloseable c = metricHandles.get(h);
        if (!type.isInstance(c)) {
            throw BackplaneException.invalid("the " + type.getSimpleName() + " was deleted");
        }
        return type.cast(c);
    }

    /** The stub is gone: cancel its calls, release its metrics; its region (and held blocks) closes with it. */
    void close() {
        for (Call c : List.copyOf(calls.values())) {
            RequestHandle h = c.handle;
            if (h != null) {
                h.cancel();
            }
        }
        calls.clear();
        held.clear();
        for (AutoCloseable c : List.copyOf(metricHandles.values())) {
            try {
                c.close();
            } catch (Exception e) {
                log.debug("{}: closing a metric failed", link.describe(), e);
            }
        }
        metricHandles.clear();
    }
}
