package io.backplane.backend.python;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.MDC;

/**
 * What the stub process prints and logs, into the host's log: its stdout and stderr (one pump
 * thread each) and its LOG frames, tagged with model and instance (<b>P8</b>). Keeps the last
 * lines of stderr, so that a stub that fails to start is reported with what it said.
 */
final class StubOutput {
    private static final Logger stubLog = LoggerFactory.getLogger("io.backplane.backend.python.stub");
    private static final int TAIL_LINES = 20;

    private final String model;
    private final String instance;
    private final String tag;
    private final ArrayDeque<String> stderrTail = new ArrayDeque<>();
    private final List<Thread> pumps = new ArrayList<>();

    StubOutput(String model, String instance, String tag) {
        this.model = model;
        this.instance = instance;
        this.tag = tag;
    }

    /** Starts a pump thread that logs each line of {@code in} (start-up thread only). */
    void startPump(InputStream in, boolean stderr) {
        Thread t = Thread.ofPlatform().daemon().name("backplane-python-" + (stderr ? "stderr-" : "stdout-") + model + "-" + instance)
                .unstarted(() -> {
                    try (BufferedReader br = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
                        String line;
                        while ((line = br.readLine()) != null) {
                            if (stderr) {
                                synchronized (stderrTail) {
                                    stderrTail.addLast(line);
                                    if (stderrTail.size() > TAIL_LINES) {
                                        stderrTail.removeFirst();
                                    }
                                }
                            }
                            log(stderr ? 1 : 0, line);
                        }
                    } catch (IOException e) {
                        ControlChannel.log.debug("{}: stub output pump ended", tag, e);
                    }
                });
        pumps.add(t);
        t.start();
    }

    /** Waits a little for the pumps to drain what the process wrote last. */
    void joinPumps() {
        for (Thread t : pumps) {
            try {
                t.join(2000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    /**
     * A note for an error message that the stub wrote to stderr, or "" when it wrote nothing. The
     * lines themselves (a traceback with source lines, perhaps) stay out of what a client reads:
     * they are in the host's log, and in {@link #stderrDetail()}.
     */
    String stderrSuffix() {
        synchronized (stderrTail) {
            return stderrTail.isEmpty() ? "" : "; what the stub wrote to stderr is in the server log";
        }
    }

    /** The last lines of stderr, for an error's {@linkplain io.backplane.spi.BackplaneException#logDetail() log detail}; null when none. */
    @org.jspecify.annotations.Nullable String stderrDetail() {
        synchronized (stderrTail) {
            return stderrTail.isEmpty() ? null : "stub stderr (last lines):\n" + String.join("\n", stderrTail);
        }
    }

    /** Logs one line of the stub at its level (0 info, 1 warn, 2 error, else debug). */
    void log(int level, String text) {
        MDC.put("model", model);
        MDC.put("instance", instance);
        try {
            switch (level) {
                case 0 -> stubLog.info("[{}/{}] {}", model, instance, text);
                case 1 -> stubLog.warn("[{}/{}] {}", model, instance, text);
                case 2 -> stubLog.error("[{}/{}] {}", model, instance, text);
                default -> stubLog.debug("[{}/{}] {}", model, instance, text);
            }
        } finally {
            MDC.remove("model");
            MDC.remove("instance");
        }
    }
}
