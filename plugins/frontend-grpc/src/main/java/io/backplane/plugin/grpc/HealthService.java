package io.backplane.plugin.grpc;

import static io.backplane.plugin.grpc.GrpcCalls.unary;

import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.spi.host.InferenceService;
import io.grpc.Status;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The standard gRPC health checking protocol, {@code grpc.health.v1.Health}, which Kubernetes' gRPC
 * probes and {@code grpc-health-probe} call. As Triton's: the answer is the server's readiness, the
 * same source of truth as {@code ServerReady} ({@link InferenceService#checkReady()}, asked afresh on
 * every call): SERVING when ready, NOT_SERVING otherwise (starting, a model not ready under strict
 * readiness, shutting down). Triton answers any service name so; this one answers for {@code ""}
 * (the whole server) and {@code inference.GRPCInferenceService}, and NOT_FOUND for any other name,
 * as the protocol asks.
 *
 * <p>Watch (which Triton does not serve) sends the status at once and again whenever it changes: the
 * host tells no readiness changes, so {@link #poll()} asks it every {@link #WATCH_INTERVAL_MILLIS}
 * while a watch is open (on an event loop of the frontend, never blocking it). An unknown name is
 * answered SERVICE_UNKNOWN and the stream stays open, as the protocol asks. {@link #close()} ends
 * every open watch with NOT_SERVING then UNAVAILABLE, so the frontend's close never waits on them.
 * Thread-safe.
 */
final class HealthService extends HealthGrpc.HealthImplBase implements AutoCloseable {
    private static final Logger log = LoggerFactory.getLogger(HealthService.class);

    /** How often open watches re-ask the host's readiness. */
    static final long WATCH_INTERVAL_MILLIS = 1000;

    private static final Set<String> KNOWN = Set.of("", GRPCInferenceServiceGrpc.SERVICE_NAME);

    private final InferenceService service;
    private final Set<Watch> watches = ConcurrentHashMap.newKeySet();
    /** Orders the readiness answers: a watch never applies an answer older than one it already applied. */
    private final AtomicLong checks = new AtomicLong();
    private final AtomicBoolean polling = new AtomicBoolean();
    private volatile boolean closed;

    HealthService(InferenceService service) {
        this.service = service;
    }

    @Override
    public void check(HealthCheckRequest req, StreamObserver<HealthCheckResponse> obs) {
        if (!KNOWN.contains(req.getService())) {
            obs.onError(unknown(req.getService()).asRuntimeException());
            return;
        }
        // The host's answer may wait for instances' readiness checks: answered when it comes, never blocking a transport thread.
        service.checkReady().whenComplete((ready, e) -> unary(obs, () -> response(status(ready, e))));
    }

    @Override
    public void watch(HealthCheckRequest req, StreamObserver<HealthCheckResponse> obs) {
        ServerCallStreamObserver<HealthCheckResponse> call = (ServerCallStreamObserver<HealthCheckResponse>) obs;
        boolean known = KNOWN.contains(req.getService());
        Watch w = new Watch(call, known);
        call.setOnCancelHandler(() -> watches.remove(w));
        watches.add(w);
        if (closed) { // close() may have looked before the add: end it here (ending twice is harmless)
            w.end();
            return;
        }
        if (!known) {
            w.offer(Long.MAX_VALUE, ServingStatus.SERVICE_UNKNOWN);
            return;
        }
        long seq = checks.incrementAndGet();
        service.checkReady().whenComplete((ready, e) -> w.offer(seq, status(ready, e)));
    }

    /** Asks the host once for every open watch; skipped while no watch is open or the last ask has not answered. */
    void poll() {
        if (watches.isEmpty() || closed || !polling.compareAndSet(false, true)) {
            return;
        }
        long seq = checks.incrementAndGet();
        try {
            service.checkReady().whenComplete((ready, e) -> {
                polling.set(false);
                ServingStatus s = status(ready, e);
                for (Watch w : watches) {
                    w.offer(seq, s);
                }
            });
        } catch (RuntimeException e) { // a host's checkReady must not fail; if one does, the next tick asks again
            polling.set(false);
            log.warn("grpc health: the host's readiness check failed; watches keep their last status", e);
        }
    }

    /** Open watches, for tests. */
    int openWatches() {
        return watches.size();
    }

    /** Ends every open watch (NOT_SERVING, then UNAVAILABLE); a watch started later ends at once. Idempotent. */
    @Override
    public void close() {
        closed = true;
        for (Watch w : watches) {
            w.end();
        }
    }

    private static ServingStatus status(@Nullable Boolean ready, @Nullable Throwable e) {
        return e == null && Boolean.TRUE.equals(ready) ? ServingStatus.SERVING : ServingStatus.NOT_SERVING;
    }

    private static HealthCheckResponse response(ServingStatus s) {
        return HealthCheckResponse.newBuilder().setStatus(s).build();
    }

    private static Status unknown(String name) {
        return Status.NOT_FOUND.withDescription("unknown service '" + name + "'; the health service answers for '' (the whole server) and '"
                + GRPCInferenceServiceGrpc.SERVICE_NAME + "'");
    }

    /** One open Watch call: sends a status only when it differs from the last one sent. */
    private final class Watch {
        private final ServerCallStreamObserver<HealthCheckResponse> call;
        private final boolean known;
        private @Nullable ServingStatus last;
        private long applied = -1;
        private boolean ended;

        Watch(ServerCallStreamObserver<HealthCheckResponse> call, boolean known) {
            this.call = call;
            this.known = known;
        }

        synchronized void offer(long seq, ServingStatus s) {
            if (ended || seq <= applied || call.isCancelled()) {
                return;
            }
            applied = seq;
            if (s != last) {
                last = s;
                call.onNext(response(s));
            }
        }

        synchronized void end() {
            watches.remove(this);
            if (ended) {
                return;
            }
            ended = true;
            if (call.isCancelled()) {
                return;
            }
            if (known && last != ServingStatus.NOT_SERVING) {
                call.onNext(response(ServingStatus.NOT_SERVING));
            }
            call.onError(Status.UNAVAILABLE.withDescription("the gRPC frontend is closing").asRuntimeException());
        }
    }
}
