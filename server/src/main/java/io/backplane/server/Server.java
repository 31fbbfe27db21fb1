package io.backplane.server;

import static java.util.Objects.requireNonNull;

import io.backplane.core.BackplaneHost;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.FrontendContext;
import io.backplane.spi.host.LogControl;
import io.backplane.spi.host.FrontendFactory;
import io.backplane.spi.host.InferenceService;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A running server: a {@link BackplaneHost} and the frontends that serve it. {@link #close()}
 * closes the frontends and the host together under one deadline: the frontends stop accepting
 * at once, and the host drains or fails every open request within its unload timeout (L7, L10).
 *
 * <p>Thread-safe. {@link #close()} may be called from several threads (a shutdown hook and a
 * test, say): the first does the work, the others wait until it is done.
 */
public final class Server implements AutoCloseable {
    private static final Logger log = LoggerFactory.getLogger(Server.class);
    /** How long past the host's unload timeout a close waits for a frontend, or for another thread's close. */
    static final Duration CLOSE_GRACE = Duration.ofSeconds(90);

    /** A frontend to start: its factory and its options. */
    public record FrontendSpec(String name, FrontendFactory factory, Map<String, String> options) {
        public FrontendSpec {
            requireNonNull(name, "name is null");
            requireNonNull(factory, "factory is null");
            options = Map.copyOf(options);
        }
    }

    private record Running(String name, Frontend frontend, String endpoint) {
    }

    private record Context(String name, InferenceService service, Map<String, String> options, @org.jspecify.annotations.Nullable LogControl logControl,
            SharedObjects objects, io.backplane.spi.host.RequestTracer tracer) implements FrontendContext {
        @Override
        public io.backplane.spi.host.DeviceSharedMemory deviceSharedMemory() {
            return service instanceof BackplaneHost h ? h.openDeviceSharedMemory() : FrontendContext.super.deviceSharedMemory();
        }

        @Override
        public io.backplane.spi.metrics.MetricRegistry metrics() {
            return service instanceof BackplaneHost h ? h.frontendMetrics("frontend '" + name + "'") : FrontendContext.super.metrics();
        }

        @Override
        public <T extends AutoCloseable> Shared<T> shared(Class<T> type, java.util.function.Supplier<T> create) {
            return new Shared<>(objects.get(type, create), false);
        }
    }

    /** The objects the frontends share (one system shared-memory registry for REST and gRPC), closed after the frontends. */
    private static final class SharedObjects {
        private final Map<Class<?>, AutoCloseable> objects = new LinkedHashMap<>();
        /** Closed after the shared objects (the tracer). */
        @org.jspecify.annotations.Nullable AutoCloseable last;

        synchronized <T extends AutoCloseable> T get(Class<T> type, java.util.function.Supplier<T> create) {
            AutoCloseable o = objects.get(type);
            if (o == null) {
                o = requireNonNull(create.get(), "shared object factory returned null");
                objects.put(type, o);
            }
            return type.cast(o);
        }

        synchronized void close() {
            for (Map.Entry<Class<?>, AutoCloseable> e : objects.entrySet()) {
                try {
                    e.getValue().close();
                } catch (Exception ex) {
                    log.warn("the shared {} failed to close", e.getKey().getSimpleName(), ex);
                }
            }
            objects.clear();
            AutoCloseable l = last;
            last = null;
            if (l != null) {
                try {
                    l.close();
                } catch (Exception ex) {
                    log.warn("{} failed to close", l.getClass().getSimpleName(), ex);
                }
            }
        }
    }

    /** The run-time log control frontends get (Logback's, when it is the binding); found once. */
    private static final @org.jspecify.annotations.Nullable LogControl LOGS = LogbackControl.detect();

    private final BackplaneHost host;
    private final List<Running> frontends;
    private final AtomicBoolean closing = new AtomicBoolean();
    private final CountDownLatch closed = new CountDownLatch(1);

    private final SharedObjects shared;

    private Server(BackplaneHost host, List<Running> frontends, SharedObjects shared) {
        this.host = host;
        this.shared = shared;
        this.frontends = List.copyOf(frontends);
    }

    /**
     * Creates and starts each frontend in order. If one fails, those already started are
     * closed, then the host, and the failure is thrown: nothing is left running.
     */
    public static Server start(BackplaneHost host, List<FrontendSpec> specs) {
        return start(host, specs, io.backplane.spi.host.RequestTracer.NONE);
    }

    /**
     * As {@link #start(BackplaneHost, List)}, the frontends tracing requests with {@code tracer}
     * (Triton's trace extension); the server closes it last when it is {@link AutoCloseable}.
     */
    public static Server start(BackplaneHost host, List<FrontendSpec> specs, io.backplane.spi.host.RequestTracer tracer) {
        requireNonNull(host, "host is null");
        requireNonNull(tracer, "tracer is null");
        List<Running> started = new ArrayList<>();
        SharedObjects shared = new SharedObjects();
        if (tracer instanceof AutoCloseable c) {
            shared.last = c; // flushed after the frontends, so the last requests' spans are exported
        }
        try {
            for (FrontendSpec spec : specs) {
                Frontend f;
                try {
                    f = requireNonNull(spec.factory().create(new Context(spec.name(), host, spec.options(), LOGS, shared, tracer)), "frontend factory returned null");
                } catch (Exception | LinkageError e) {
                    throw new BackplaneException(ErrorCode.INTERNAL, "frontend '" + spec.name() + "' could not be created with options "
                            + spec.options() + ": " + Main.Failures.describe(e), e);
                }
                try {
                    f.start();
                } catch (Exception | LinkageError e) {
                    closeQuietly(spec.name(), f);
                    throw new BackplaneException(ErrorCode.UNAVAILABLE, "frontend '" + spec.name() + "' failed to start with options " + spec.options()
                            + ": " + Main.Failures.describe(e) + (spec.options().containsKey("port") ? " (is the port in use? 0 picks a free one)" : ""), e);
                }
                String endpoint = f.endpoint();
                started.add(new Running(spec.name(), f, endpoint));
                log.info("frontend '{}' serving at {}", spec.name(), endpoint);
            }
        } catch (RuntimeException e) {
            for (int i = started.size() - 1; i >= 0; i--) {
                closeQuietly(started.get(i).name(), started.get(i).frontend());
            }
            shared.close();
            try {
                host.close();
            } catch (RuntimeException suppressed) {
                e.addSuppressed(suppressed);
            }
            throw e;
        }
        return new Server(host, started, shared);
    }

    private static void closeQuietly(String name, Frontend f) {
        try {
            f.close();
        } catch (Throwable t) {
            log.warn("frontend '{}' failed to close", name, t);
        }
    }

    public BackplaneHost host() {
        return host;
    }

    /** The started frontends' endpoints by name, in start order (bound ports, when 0 was asked). */
    public Map<String, String> endpoints() {
        Map<String, String> out = new LinkedHashMap<>();
        for (Running r : frontends) {
            out.put(r.name(), r.endpoint());
        }
        return out;
    }

    /** Whether {@link #close()} has finished. */
    public boolean isClosed() {
        return closed.getCount() == 0;
    }

    /** Blocks until the server is closed (by {@link #close()}, e.g. from the SIGTERM hook). */
    public void awaitClosed() throws InterruptedException {
        closed.await();
    }

    /** How long a close waits for the frontends and for another thread's close: the host's unload timeout and {@link #CLOSE_GRACE}. */
    private Duration closeBound() {
        return host.unloadTimeout().plus(CLOSE_GRACE);
    }

    /**
     * Closes every frontend and the host at once, so one deadline bounds them all: each frontend
     * stops accepting at once and answers what is still open when its drain timeout ends; the host
     * stops admission and drains or fails its open requests within its unload timeout (L7, L10).
     * Returns when all are closed. Idempotent; later callers wait for the first.
     */
    @Override
    public void close() {
        if (!closing.compareAndSet(false, true)) {
            try {
                if (!closed.await(closeBound().toMillis(), TimeUnit.MILLISECONDS)) {
                    log.warn("the server's close, started by another thread, has not finished within {}; returning without it", closeBound());
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return;
        }
        long t0 = System.nanoTime();
        try {
            log.info("shutting down: closing {} frontend(s) and the host", frontends.size());
            List<Thread> closers = new ArrayList<>();
            for (int i = frontends.size() - 1; i >= 0; i--) {
                Running r = frontends.get(i);
                closers.add(Thread.ofPlatform().name("backplane-close-" + r.name()).start(() -> {
                    closeQuietly(r.name(), r.frontend());
                    log.debug("frontend '{}' closed", r.name());
                }));
            }
            try {
                host.close();
            } catch (RuntimeException e) {
                log.error("the host did not close cleanly", e);
            }
            // Each frontend drains within its own timeout; the wait is bounded all the same, so a
            // frontend whose close never returns cannot hold the shutdown.
            long deadline = t0 + closeBound().toNanos();
            for (Thread t : closers) {
                try {
                    if (!t.join(Duration.ofNanos(Math.max(1, deadline - System.nanoTime())))) {
                        log.error("{} did not finish within {}; closing without waiting for it", t.getName(), closeBound());
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            shared.close(); // after every frontend: no request holds a shared region any more
            log.info("stopped in {} ms", (System.nanoTime() - t0) / 1_000_000);
        } finally {
            closed.countDown();
        }
    }
}
