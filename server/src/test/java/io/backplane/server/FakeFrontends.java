package io.backplane.server;

import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.FrontendContext;
import io.backplane.spi.host.FrontendFactory;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * Fake frontends named "http" and "grpc", registered in test resources
 * (META-INF/services/io.backplane.spi.host.FrontendFactory). Each binds a real socket on its
 * {@code port} option (0: a free one) without starting threads, and records what happened.
 * Option {@code fail=start} makes start() throw.
 */
public final class FakeFrontends {
    /** Every fake created since the last {@link #reset()}. */
    static final List<Fake> CREATED = new CopyOnWriteArrayList<>();

    private FakeFrontends() {
    }

    static void reset() {
        CREATED.clear();
    }

    static final class Fake implements Frontend {
        final String name;
        final FrontendContext context;
        volatile boolean started;
        volatile boolean closed;
        /** Whether the host was still live when this frontend was closed (frontends close first). */
        volatile boolean hostLiveAtClose;
        private volatile ServerSocket socket;

        Fake(String name, FrontendContext context) {
            this.name = name;
            this.context = context;
        }

        Map<String, String> options() {
            return context.options();
        }

        @Override
        public void start() throws IOException {
            if ("start".equals(options().get("fail"))) {
                throw new IOException("simulated bind failure");
            }
            ServerSocket s = new ServerSocket();
            s.bind(new InetSocketAddress(options().getOrDefault("host", "127.0.0.1"), Integer.parseInt(options().getOrDefault("port", "0"))));
            socket = s;
            started = true;
        }

        @Override
        public String endpoint() {
            return "fake://" + options().getOrDefault("host", "127.0.0.1") + ":" + socket.getLocalPort();
        }

        @Override
        public void close() {
            hostLiveAtClose = context.service().isLive();
            closed = true;
            ServerSocket s = socket;
            if (s != null) {
                try {
                    s.close();
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            }
        }
    }

    private abstract static class Factory implements FrontendFactory {
        @Override
        public Frontend create(FrontendContext context) {
            Fake f = new Fake(name(), context);
            CREATED.add(f);
            return f;
        }
    }

    public static final class Http extends Factory {
        @Override
        public String name() {
            return "http";
        }
    }

    public static final class Grpc extends Factory {
        @Override
        public String name() {
            return "grpc";
        }
    }
}
