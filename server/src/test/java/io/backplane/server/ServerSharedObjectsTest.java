package io.backplane.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.FrontendContext;
import io.backplane.spi.host.FrontendFactory;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** The host-level hook through which frontends share an object (the shared-memory registry): one per server, closed after them. */
class ServerSharedObjectsTest {
    /** A shared object that records its close and whether a frontend was still open then. */
    static final class Registry implements AutoCloseable {
        static final AtomicInteger CREATED = new AtomicInteger();
        final List<Boolean> openFrontendsAtClose = new CopyOnWriteArrayList<>();
        volatile List<Recorder> frontends = List.of();

        Registry() {
            CREATED.incrementAndGet();
        }

        @Override
        public void close() {
            openFrontendsAtClose.add(frontends.stream().anyMatch(f -> !f.closed));
        }
    }

    static final class Recorder implements Frontend {
        final FrontendContext.Shared<Registry> registry;
        volatile boolean closed;

        Recorder(FrontendContext context) {
            registry = context.shared(Registry.class, Registry::new);
        }

        @Override
        public void start() {
        }

        @Override
        public String endpoint() {
            return "test://";
        }

        @Override
        public void close() {
            closed = true;
        }
    }

    static FrontendFactory factory(String name, List<Recorder> made) {
        return new FrontendFactory() {
            @Override
            public String name() {
                return name;
            }

            @Override
            public Frontend create(FrontendContext context) {
                Recorder r = new Recorder(context);
                made.add(r);
                return r;
            }
        };
    }

    @Test
    void shared_oneObjectForEveryFrontend_closedByTheServerAfterThem() {
        List<Recorder> made = new CopyOnWriteArrayList<>();
        int before = Registry.CREATED.get();
        Server server = Server.start(BackplaneHost.builder().build(), List.of(new Server.FrontendSpec("a", factory("a", made), Map.of()),
                new Server.FrontendSpec("b", factory("b", made), Map.of())));
        Registry r = made.get(0).registry.value();
        r.frontends = List.copyOf(made);
        assertSame(r, made.get(1).registry.value(), "both frontends get the same object");
        assertEquals(before + 1, Registry.CREATED.get());
        assertFalse(made.get(0).registry.callerCloses(), "the server owns it");
        assertTrue(r.openFrontendsAtClose.isEmpty());
        server.close();
        assertEquals(List.of(false), r.openFrontendsAtClose, "closed once, after every frontend");
    }
}
