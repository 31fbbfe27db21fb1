package io.backplane.plugin.grpc;

import static java.util.Objects.requireNonNull;

import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;
import io.backplane.spi.metrics.Metric;
import io.backplane.spi.metrics.MetricFamily;
import io.backplane.spi.metrics.MetricKind;
import io.backplane.spi.metrics.MetricRegistry;
import io.grpc.Attributes;
import io.grpc.Grpc;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.SecurityLevel;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerMethodDefinition;
import io.grpc.ServerServiceDefinition;
import io.grpc.ServerTransportFilter;
import io.grpc.ServiceDescriptor;
import io.grpc.Status;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Answers a message that does not parse with INVALID_ARGUMENT, on every method of the service.
 *
 * <p>grpc-java parses a request inside the call's listener ({@code ServerCallImpl}'s
 * {@code messagesAvailable} calls {@code MethodDescriptor.parseRequest}); when the marshaller
 * throws there, the server ends the call with {@code UNKNOWN: Application error processing RPC}
 * and its executor logs the exception at SEVERE with a stack trace, once per message: a cheap
 * way to flood the log. {@link #guard} therefore gives every method a request marshaller that
 * never throws (it delegates to the method's own, so protobuf's parsing and its buffer handling
 * are unchanged, and returns a {@link Parsed} holding the message or the parse error) and a
 * listener that ends the call with INVALID_ARGUMENT on an error. A bidirectional stream is ended
 * as a client's cancellation ends it: the service's listener hears {@code onCancel}, so the
 * stream's open requests are cancelled (R2) and nothing more is sent.
 *
 * <p>Each malformed message is counted in {@link #METRIC} (label {@code method}) when the host
 * gives the frontend metrics, and logged at WARN once per connection (one line: remote address,
 * method, reason), at DEBUG after that. The connection's "already warned" flag lives in the
 * transport's attributes ({@link #transportReady}), so it goes with the connection and nothing
 * here grows with the number of connections.
 *
 * <p>Thread-safe.
 */
final class MalformedMessages extends ServerTransportFilter implements AutoCloseable {
    private static final Logger log = LoggerFactory.getLogger(MalformedMessages.class);

    /** The counter family on {@code /metrics}. */
    static final String METRIC = "backplane_grpc_malformed_messages_total";

    private static final Attributes.Key<Connection> CONNECTION = Attributes.Key.create("backplane-grpc-connection");

    /** One connection: whether its first malformed message was logged at WARN. */
    private static final class Connection {
        final AtomicBoolean warned = new AtomicBoolean();
    }

    private final @Nullable MetricFamily family;
    /** Per bare method name ({@code ModelInfer}); filled by {@link #guard} before the server starts, read-only after. */
    private final Map<String, Metric> counts = new LinkedHashMap<>();

    /** @param metrics the host's registry, or null when the host gives the frontend none (then nothing is counted) */
    MalformedMessages(@Nullable MetricRegistry metrics) {
        MetricFamily f = null;
        if (metrics != null) {
            try {
                f = metrics.family(METRIC, "gRPC messages that could not be parsed (answered INVALID_ARGUMENT), by method", MetricKind.COUNTER);
            } catch (RuntimeException e) {
                log.warn("grpc frontend: the metric {} could not be created ({}); malformed messages are not counted", METRIC, e.toString());
            }
        }
        this.family = f;
    }

    @Override
    public Attributes transportReady(Attributes transportAttrs) {
        return transportAttrs.toBuilder().set(CONNECTION, new Connection()).build();
    }

    /** {@code definition} with every method's requests parsed by a marshaller that never throws. */
    ServerServiceDefinition guard(ServerServiceDefinition definition) {
        ServiceDescriptor sd = definition.getServiceDescriptor();
        List<ServerMethodDefinition<?, ?>> methods = new ArrayList<>();
        for (ServerMethodDefinition<?, ?> m : definition.getMethods()) {
            methods.add(guard(m));
        }
        ServiceDescriptor.Builder guarded = ServiceDescriptor.newBuilder(sd.getName()).setSchemaDescriptor(sd.getSchemaDescriptor());
        methods.forEach(m -> guarded.addMethod(m.getMethodDescriptor()));
        ServerServiceDefinition.Builder out = ServerServiceDefinition.builder(guarded.build());
        methods.forEach(out::addMethod);
        return out.build();
    }

    private <Q, R> ServerMethodDefinition<Parsed<Q>, R> guard(ServerMethodDefinition<Q, R> definition) {
        MethodDescriptor<Q, R> method = definition.getMethodDescriptor();
        String name = requireNonNull(method.getBareMethodName(), "bare method name is null");
        String type = name + " request";
        if (method.getRequestMarshaller() instanceof MethodDescriptor.PrototypeMarshaller<Q> p && p.getMessagePrototype() instanceof Message m) {
            type = m.getDescriptorForType().getFullName();
        }
        if (family != null) {
            try {
                counts.put(name, family.metric(Map.of("method", name)));
            } catch (RuntimeException e) {
                log.warn("grpc frontend: the metric {} for method {} could not be created ({}); its malformed messages are not counted",
                        METRIC, name, e.toString());
            }
        }
        MethodDescriptor<Parsed<Q>, R> guarded = method.toBuilder(new GuardedMarshaller<>(method.getRequestMarshaller()),
                method.getResponseMarshaller()).build();
        return ServerMethodDefinition.create(guarded, new GuardedHandler<>(method, definition.getServerCallHandler(), name, type));
    }

    /** Counts and logs one malformed message; returns the status for its client. */
    private Status malformed(ServerCall<?, ?> call, String method, String type, String reason) {
        Metric m = counts.get(method);
        if (m != null) {
            try {
                m.increment(1);
            } catch (RuntimeException e) {
                log.debug("the malformed-message count for {} failed: {}", method, e.toString());
            }
        }
        Connection c = call.getAttributes().get(CONNECTION);
        Object remote = call.getAttributes().get(Grpc.TRANSPORT_ATTR_REMOTE_ADDR);
        if (c != null && c.warned.compareAndSet(false, true)) {
            log.warn("grpc: a malformed {} message from {}: {} (answered INVALID_ARGUMENT; further ones from this connection are logged at DEBUG)",
                    method, remote, reason);
        } else {
            log.debug("grpc: a malformed {} message from {}: {}", method, remote, reason);
        }
        String simple = type.substring(type.lastIndexOf('.') + 1);
        return Status.INVALID_ARGUMENT.withDescription("the " + simple + " message could not be parsed: " + reason + "; send a valid " + type);
    }

    /** Protobuf's reason (an {@link InvalidProtocolBufferException}'s message), else the most specific message in the chain. */
    static String reason(Throwable t) {
        String best = null;
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof InvalidProtocolBufferException && c.getMessage() != null) {
                return c.getMessage();
            }
            if (c.getMessage() != null) {
                best = c.getMessage();
            } else if (c instanceof io.grpc.StatusRuntimeException s && s.getStatus().getDescription() != null) {
                best = s.getStatus().getDescription();
            }
        }
        return best != null ? best : t.getClass().getSimpleName();
    }

    @Override
    public void close() {
        counts.values().forEach(Metric::close);
        if (family != null) {
            family.close();
        }
    }

    /** What the guarded marshaller parsed: the message, or why there is none. */
    record Parsed<Q>(@Nullable Q message, @Nullable String error) {
    }

    /** Delegates to the method's own marshaller; a parse failure becomes a {@link Parsed} error instead of an exception. */
    private static final class GuardedMarshaller<Q> implements MethodDescriptor.Marshaller<Parsed<Q>> {
        private final MethodDescriptor.Marshaller<Q> delegate;

        GuardedMarshaller(MethodDescriptor.Marshaller<Q> delegate) {
            this.delegate = delegate;
        }

        @Override
        public InputStream stream(Parsed<Q> value) {
            Q m = value.message();
            if (m == null) {
                throw new IllegalArgumentException("a message that failed to parse cannot be serialized: " + value.error());
            }
            return delegate.stream(m);
        }

        @Override
        public Parsed<Q> parse(InputStream stream) {
            try {
                return new Parsed<>(delegate.parse(stream), null);
            } catch (RuntimeException e) {
                return new Parsed<>(null, reason(e));
            }
        }
    }

    private final class GuardedHandler<Q, R> implements ServerCallHandler<Parsed<Q>, R> {
        private final MethodDescriptor<Q, R> method;
        private final ServerCallHandler<Q, R> next;
        private final String name;
        private final String type;

        GuardedHandler(MethodDescriptor<Q, R> method, ServerCallHandler<Q, R> next, String name, String type) {
            this.method = method;
            this.next = next;
            this.name = name;
            this.type = type;
        }

        @Override
        public ServerCall.Listener<Parsed<Q>> startCall(ServerCall<Parsed<Q>, R> call, Metadata headers) {
            GuardedCall<Q, R> inner = new GuardedCall<>(call, method);
            return new GuardedListener<>(next.startCall(inner, headers), inner, name, type);
        }
    }

    /**
     * The listener the transport calls (its callbacks are serialized by gRPC, so {@code ended}
     * needs no lock). After a malformed message it has ended the call and told the service's
     * listener {@code onCancel}; every later event is dropped, so the service hears exactly one end.
     */
    private final class GuardedListener<Q, R> extends ServerCall.Listener<Parsed<Q>> {
        private final ServerCall.Listener<Q> delegate;
        private final GuardedCall<Q, R> call;
        private final String name;
        private final String type;
        private boolean ended;

        GuardedListener(ServerCall.Listener<Q> delegate, GuardedCall<Q, R> call, String name, String type) {
            this.delegate = delegate;
            this.call = call;
            this.name = name;
            this.type = type;
        }

        @Override
        public void onMessage(Parsed<Q> parsed) {
            if (ended) {
                return;
            }
            Q message = parsed.message();
            if (message != null) {
                delegate.onMessage(message);
                return;
            }
            ended = true;
            call.refuse(malformed(call, name, type, String.valueOf(parsed.error())));
            delegate.onCancel();
        }

        @Override
        public void onHalfClose() {
            if (!ended) {
                delegate.onHalfClose();
            }
        }

        @Override
        public void onCancel() {
            if (!ended) {
                ended = true;
                delegate.onCancel();
            }
        }

        @Override
        public void onComplete() {
            if (!ended) {
                ended = true;
                delegate.onComplete();
            }
        }

        @Override
        public void onReady() {
            if (!ended) {
                delegate.onReady();
            }
        }
    }

    /**
     * The call the service sees: its own method descriptor, and after {@link #refuse} its sends
     * and close are dropped (the client has its status). Sends and close are serialized, since the
     * service may send from another thread while the transport thread refuses.
     */
    private static final class GuardedCall<Q, R> extends ServerCall<Q, R> {
        private final ServerCall<Parsed<Q>, R> delegate;
        private final MethodDescriptor<Q, R> method;
        private boolean closed;

        GuardedCall(ServerCall<Parsed<Q>, R> delegate, MethodDescriptor<Q, R> method) {
            this.delegate = delegate;
            this.method = method;
        }

        synchronized void refuse(Status status) {
            if (!closed) {
                closed = true;
                delegate.close(status, new Metadata());
            }
        }

        @Override
        public void request(int numMessages) {
            delegate.request(numMessages);
        }

        @Override
        public synchronized void sendHeaders(Metadata headers) {
            if (!closed) {
                delegate.sendHeaders(headers);
            }
        }

        @Override
        public synchronized void sendMessage(R message) {
            if (!closed) {
                delegate.sendMessage(message);
            }
        }

        @Override
        public synchronized void close(Status status, Metadata trailers) {
            if (!closed) {
                closed = true;
                delegate.close(status, trailers);
            }
        }

        @Override
        public boolean isReady() {
            return delegate.isReady();
        }

        @Override
        public boolean isCancelled() {
            return delegate.isCancelled();
        }

        @Override
        public void setMessageCompression(boolean enabled) {
            delegate.setMessageCompression(enabled);
        }

        @Override
        public void setCompression(String compressor) {
            delegate.setCompression(compressor);
        }

        @Override
        public void setOnReadyThreshold(int numBytes) {
            delegate.setOnReadyThreshold(numBytes);
        }

        @Override
        public SecurityLevel getSecurityLevel() {
            return delegate.getSecurityLevel();
        }

        @Override
        public Attributes getAttributes() {
            return delegate.getAttributes();
        }

        @Override
        public @Nullable String getAuthority() {
            return delegate.getAuthority();
        }

        @Override
        public MethodDescriptor<Q, R> getMethodDescriptor() {
            return method;
        }
    }
}
