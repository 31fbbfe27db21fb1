package io.backplane.plugin.grpc;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.host.InferenceService;
import io.backplane.spi.host.MemoryReservation;
import io.grpc.Context;
import io.grpc.ForwardingServerCall;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerStreamTracer;
import io.grpc.Status;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Charges the bytes of a gRPC message to the host's memory budget (O1) while the transport reads
 * it, before the message exists: gRPC assembles a whole message in direct memory before the
 * service sees it, so a flood of large messages could otherwise exhaust direct memory
 * ("Cannot reserve … bytes of direct buffer memory") before any check ran.
 *
 * <p>A {@link ServerStreamTracer} per call learns each chunk the deframer takes
 * ({@code inboundWireSize}) and grows the call's reservation in steps of {@link #CHUNK} once the
 * message passes {@link #FREE} bytes (below that the HTTP/2 flow-control window, the connection
 * cap and the service's own check after parsing bound what is held). When the budget cannot hold
 * the next step the call ends at once with RESOURCE_EXHAUSTED and the budget's message, and the
 * transport drops what it had read. The reservation is returned when the message has been read
 * (the service then reserves the parsed request itself) and when the call ends.
 *
 * <p>The interceptor half wraps each call so the tracer, which runs on the transport thread, can
 * close it while the service may be sending on another thread: sends and closes of the wrapped
 * call are serialized, and after the refusal further sends are dropped (the client has its
 * status).
 */
final class InboundBudget extends ServerStreamTracer.Factory implements ServerInterceptor {
    private static final Logger log = LoggerFactory.getLogger(InboundBudget.class);
    private static final Context.Key<Guard> GUARD = Context.key("backplane-inbound-budget");

    /** Bytes of one message read before it is charged to the budget. */
    static final long FREE = 1 << 20;
    /** The step in which a message's reservation grows. */
    static final long CHUNK = 1 << 20;

    private final InferenceService service;

    InboundBudget(InferenceService service) {
        this.service = service;
    }

    @Override
    public ServerStreamTracer newServerStreamTracer(String fullMethodName, Metadata headers) {
        return new Guard(fullMethodName);
    }

    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
        Guard g = GUARD.get();
        if (g == null) {
            return next.startCall(call, headers);
        }
        GuardedCall<Q, R> guarded = new GuardedCall<>(call);
        g.attach(guarded);
        return next.startCall(guarded, headers);
    }

    /** One call's budget for the message it is reading. Thread-safe. */
    private final class Guard extends ServerStreamTracer {
        private final String method;
        private @Nullable GuardedCall<?, ?> call;
        private @Nullable MemoryReservation held;
        private long read;
        private long reserved;
        private @Nullable Status refusal;
        private boolean ended;

        Guard(String method) {
            this.method = method;
        }

        @Override
        public Context filterContext(Context context) {
            return context.withValue(GUARD, this);
        }

        void attach(GuardedCall<?, ?> c) {
            Status s;
            synchronized (this) { // never held while calling the call: its close may report streamClosed at once
                call = c;
                s = refusal;
            }
            if (s != null) {
                c.refuse(s);
            }
        }

        @Override
        public void inboundWireSize(long bytes) {
            GuardedCall<?, ?> refuse;
            Status status;
            synchronized (this) {
                if (ended || refusal != null) {
                    return;
                }
                read += bytes;
                if (read <= FREE) {
                    return;
                }
                long need = (read + CHUNK - 1) / CHUNK * CHUNK;
                if (need <= reserved) {
                    return;
                }
                try {
                    MemoryReservation h = held;
                    if (h == null) {
                        h = service.reserveMemory(need, "a gRPC message to " + method + " (" + read + " bytes read so far)");
                        held = h;
                    } else {
                        h.grow(need - reserved);
                    }
                    reserved = need;
                    return;
                } catch (BackplaneException e) {
                    if (e.code() != ErrorCode.RESOURCE_EXHAUSTED) {
                        throw e;
                    }
                    status = Status.RESOURCE_EXHAUSTED.withDescription(e.getMessage());
                    refusal = status;
                    refuse = call;
                    release();
                }
            }
            log.debug("grpc call {} refused while its message was read: {}", method, status.getDescription());
            if (refuse != null) {
                refuse.refuse(status);
            }
        }

        @Override
        public synchronized void inboundMessageRead(int seqNo, long optionalWireSize, long optionalUncompressedSize) {
            read = 0;
            release();
        }

        @Override
        public synchronized void streamClosed(Status status) {
            ended = true;
            release();
        }

        private void release() {
            MemoryReservation h = held;
            held = null;
            reserved = 0;
            if (h != null) {
                h.close();
            }
        }
    }

    /** A call whose sends and close are serialized, so the {@link Guard} can end it from the transport thread. */
    private static final class GuardedCall<Q, R> extends ForwardingServerCall.SimpleForwardingServerCall<Q, R> {
        private boolean closed;

        GuardedCall(ServerCall<Q, R> delegate) {
            super(delegate);
        }

        @Override
        public synchronized void sendHeaders(Metadata headers) {
            if (!closed) {
                super.sendHeaders(headers);
            }
        }

        @Override
        public synchronized void sendMessage(R message) {
            if (!closed) {
                super.sendMessage(message);
            }
        }

        @Override
        public synchronized void close(Status status, Metadata trailers) {
            if (!closed) {
                closed = true;
                super.close(status, trailers);
            }
        }

        synchronized void refuse(Status status) {
            if (!closed) {
                closed = true;
                super.close(status, new Metadata());
            }
        }
    }
}
