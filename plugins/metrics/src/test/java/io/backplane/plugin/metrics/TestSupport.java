package io.backplane.plugin.metrics;

import static org.junit.jupiter.api.Assertions.fail;

import io.backplane.spi.host.FrontendContext;
import io.backplane.spi.host.InferenceService;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.util.List;
import java.util.Map;

/** Test helpers: a frontend context, port and thread hygiene checks. */
public final class TestSupport {
    private TestSupport() {
    }

    public static FrontendContext context(InferenceService service, Map<String, String> options) {
        return new FrontendContext() {
            @Override
            public InferenceService service() {
                return service;
            }

            @Override
            public Map<String, String> options() {
                return options;
            }
        };
    }

    /** Fails unless nothing listens on {@code port} of 127.0.0.1. */
    public static void assertPortClosed(int port) {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress("127.0.0.1", port), 500);
            fail("port " + port + " still accepts connections after close");
        } catch (IOException expected) {
            // closed, as it must be
        }
    }

    public static List<String> backplaneThreads() {
        return Thread.getAllStackTraces().keySet().stream().filter(Thread::isAlive).map(Thread::getName)
                .filter(n -> n.startsWith("backplane-")).sorted().toList();
    }

    /** Fails if any backplane-* thread is still alive 5 s after close. */
    public static void assertNoBackplaneThreads() {
        long end = System.nanoTime() + 5_000_000_000L;
        List<String> left = backplaneThreads();
        while (!left.isEmpty() && System.nanoTime() < end) {
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
            left = backplaneThreads();
        }
        if (!left.isEmpty()) {
            fail("threads left running after close: " + left);
        }
    }
}
