package io.backplane.backend.python;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.ArrayDeque;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A warm template process ({@code backplane_stub.py --template}, see {@code backplane_template.py}):
 * a child of the JVM that imported numpy, the utils modules and the stub once, and forks a stub on
 * request. The control channel is the template's stdin (one JSON request a line) and stdout (one
 * answer a line, and an {@code exit <pid> <code>} line whenever it reaps a child); a reader thread
 * dispatches the answers. Each fork gets a fresh listening socket in the backend's private socket
 * folder, to which the child connects its stdout (also its stdin, whose end of file tells it the
 * host died) and its stderr, proving itself with a one-time key.
 *
 * <p>Supervised like a stub (<b>P11</b>): a monitor thread pings it every heartbeat interval; one
 * that has not answered within the heartbeat time-out (stopped, hung) is unhealthy: {@link #fork}
 * refuses at once, so the caller spawns its stub instead of waiting, and a fork request it does not
 * answer within {@link #forkAnswerMillis} makes it unhealthy too. One still silent
 * {@code stall_kill_timeout_ms} later is killed (SIGKILL reaches a stopped process too); the
 * launcher starts a new one at the next stub start. Its children's deaths never depend on it
 * ({@link ForkedProcess}, {@link PidWatch}).
 *
 * <p>Thread-safe: forks may be requested from many threads at once (instances starting in
 * parallel); requests are written one at a time, answers matched by id.
 */
final class StubTemplate implements AutoCloseable {
    private static final Logger log = LoggerFactory.getLogger(StubTemplate.class);
    private static final SecureRandom RANDOM = new SecureRandom();
    private static final int TAIL_LINES = 20;
    /** The longest a fork request waits for the template's answer (see {@link #forkAnswerMillis}). */
    static final long FORK_ANSWER_MAX_MILLIS = 2000;

    private final Process process;
    private final ProcessGroup group;
    private final Path socketDir;
    private final String describe;
    private final OutputStream requests; // guarded by itself
    private final CompletableFuture<Long> ready = new CompletableFuture<>();
    private final Map<Long, CompletableFuture<ForkedProcess>> pending = new ConcurrentHashMap<>();
    private final Map<Long, ForkedProcess> children = new ConcurrentHashMap<>();
    private final AtomicLong ids = new AtomicLong();
    private final ArrayDeque<String> stderrTail = new ArrayDeque<>();
    private final Thread reader;
    private final Thread stderrPump;
    private final Thread monitor;
    private final Supervision supervision;
    private final java.util.concurrent.CountDownLatch closing = new java.util.concurrent.CountDownLatch(1);
    private volatile boolean gone;
    /** When the outstanding ping (or unanswered fork request) was sent; 0 when everything was answered. */
    private volatile long waitingSinceNanos;
    private volatile boolean stalled;
    private long pingSeq; // monitor thread only

    /**
     * The template's liveness deadlines, the stubs' own: pinged every {@code heartbeatMillis},
     * unhealthy after {@code heartbeatTimeoutMillis} without an answer, killed {@code stallKillMillis}
     * after that.
     */
    record Supervision(long heartbeatMillis, long heartbeatTimeoutMillis, long stallKillMillis) {
        static Supervision of(StubSettings s) {
            return new Supervision(s.heartbeatIntervalMillis(), s.heartbeatTimeoutMillis(), s.stallKillMillis());
        }
    }

    private StubTemplate(Process process, Path socketDir, String describe, Supervision supervision) {
        this.process = process;
        this.group = ProcessGroup.of(process);
        this.socketDir = socketDir;
        this.describe = describe;
        this.supervision = supervision;
        this.requests = process.getOutputStream();
        this.reader = Thread.ofPlatform().daemon().name("backplane-python-template-" + process.pid()).unstarted(this::readLoop);
        this.stderrPump = Thread.ofPlatform().daemon().name("backplane-python-template-stderr-" + process.pid()).unstarted(this::stderrLoop);
        this.monitor = Thread.ofPlatform().daemon().name("backplane-python-template-monitor-" + process.pid()).unstarted(this::monitorLoop);
    }

    /**
     * Starts a template with {@code command} (the stub's interpreter, flags and script, then
     * {@code --template}), {@code environment} (a stub's, less its per-stub token) in {@code directory},
     * and waits until it has imported everything and reports ready.
     *
     * @throws IOException when the interpreter does not start, or the template exits or is not ready within the timeout
     */
    static StubTemplate start(List<String> command, Map<String, String> environment, Path directory, Path socketDir, long timeoutMillis,
            Supervision supervision) throws IOException {
        ProcessBuilder pb = new ProcessBuilder(command).directory(directory.toFile());
        pb.environment().clear();
        pb.environment().putAll(environment);
        StubTemplate t = new StubTemplate(pb.start(), socketDir, String.join(" ", command), supervision);
        t.reader.start();
        t.stderrPump.start();
        try {
            long pid = t.ready.get(timeoutMillis, TimeUnit.MILLISECONDS);
            log.debug("python stub template started (pid {}): {}", pid, t.describe);
            t.monitor.start();
            return t;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            t.close();
            throw new IOException("interrupted while the stub template started", e);
        } catch (ExecutionException | TimeoutException e) {
            t.close();
            throw new IOException("the stub template " + (e instanceof TimeoutException ? "was not ready within " + timeoutMillis + " ms"
                    : "exited before it was ready") + t.stderrSuffix(), e);
        }
    }

    long pid() {
        return process.pid();
    }

    boolean isAlive() {
        return !gone && process.isAlive();
    }

    /** Alive and answering: a fork request now gets its answer within {@link #forkAnswerMillis}. */
    boolean isHealthy() {
        return isAlive() && !stalled;
    }

    /** How long a fork request waits for the template's answer: a fork takes milliseconds; past this the template is unhealthy. */
    long forkAnswerMillis() {
        return Math.max(1, Math.min(supervision.heartbeatTimeoutMillis(), FORK_ANSWER_MAX_MILLIS));
    }

    private void monitorLoop() {
        try {
            while (!gone && !closing.await(supervision.heartbeatMillis(), TimeUnit.MILLISECONDS)) {
                long since = waitingSinceNanos;
                if (since == 0) {
                    waitingSinceNanos = System.nanoTime();
                    send("ping " + (++pingSeq));
                    continue;
                }
                long silentMillis = (System.nanoTime() - since) / 1_000_000;
                if (silentMillis >= supervision.heartbeatTimeoutMillis() && !stalled) {
                    stalled = true;
                    log.warn("python stub template (pid {}) has not answered for {} ms (stopped or hung): stubs are spawned instead of forked;"
                            + " it is killed if still silent after {} ms more", pid(), silentMillis, supervision.stallKillMillis());
                }
                if (silentMillis >= supervision.heartbeatTimeoutMillis() + supervision.stallKillMillis()) {
                    log.warn("python stub template (pid {}) still silent after {} ms: killing it; the next stub start makes a new one", pid(),
                            silentMillis);
                    group.kill(); // a fork that has not made its own group yet goes with it
                    process.destroyForcibly(); // its end of file ends the reader, which marks it gone
                    return;
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (IOException e) {
            log.debug("python stub template (pid {}): ping failed", pid(), e);
        }
    }

    private void answered() {
        waitingSinceNanos = 0;
        if (stalled) {
            stalled = false;
            log.info("python stub template (pid {}) answers again", pid());
        }
    }

    private void send(String line) throws IOException {
        byte[] b = (line + "\n").getBytes(StandardCharsets.UTF_8);
        synchronized (requests) {
            if (gone) {
                throw new IOException("the stub template (pid " + pid() + ") is gone");
            }
            requests.write(b);
            requests.flush();
        }
    }

    /** Fork requests sent to it so far (tests). */
    long forkRequests() {
        return ids.get();
    }

    /** Stubs forked by this template that have not exited (tests). */
    List<Long> children() {
        return List.copyOf(children.keySet());
    }

    /**
     * Forks a stub that runs the stub's main with {@code argv} (the script, then its arguments), in
     * {@code environment} and {@code directory}, and waits until it has connected its output.
     *
     * @throws IOException when the template is gone or unhealthy, refuses, does not answer within {@link #forkAnswerMillis},
     *     or the child dies or does not connect within the timeout
     */
    ForkedProcess fork(List<String> argv, Map<String, String> environment, Path directory, long timeoutMillis) throws IOException {
        if (!isHealthy()) {
            throw new IOException("the stub template (pid " + pid() + ") is " + (isAlive() ? "not answering" : "gone"));
        }
        long id = ids.incrementAndGet();
        String key = HexFormat.of().formatHex(randomBytes(16));
        Path logSocket = socketDir.resolve("t" + id + "-" + HexFormat.of().formatHex(randomBytes(6)) + ".sock");
        CompletableFuture<ForkedProcess> reply = new CompletableFuture<>();
        pending.put(id, reply);
        ForkedProcess child = null;
        AtomicBoolean connected = new AtomicBoolean();
        CompletableFuture<@Nullable Void> connectBy = CompletableFuture.completedFuture(null);
        try (ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
            server.bind(UnixDomainSocketAddress.of(logSocket));
            Map<String, Object> request = new LinkedHashMap<>();
            request.put("id", id);
            request.put("argv", argv);
            request.put("env", environment);
            request.put("cwd", directory.toString());
            request.put("log", logSocket.toString());
            request.put("key", key);
            long sent = System.nanoTime();
            send(Wire.json(request));
            long deadline = sent + timeoutMillis * 1_000_000;
            try {
                child = reply.get(Math.min(timeoutMillis, forkAnswerMillis()), TimeUnit.MILLISECONDS);
            } catch (TimeoutException e) {
                if (waitingSinceNanos == 0 || waitingSinceNanos - sent > 0) {
                    waitingSinceNanos = sent; // the monitor kills it if it stays silent
                }
                stalled = true;
                log.warn("python stub template (pid {}) did not answer a fork request within {} ms: stubs are spawned instead of forked"
                        + " until it answers again", pid(), forkAnswerMillis());
                throw e;
            }
            ForkedProcess c = child;
            Runnable abort = () -> {
                if (!connected.get()) {
                    closeQuietly(server);
                }
            };
            c.onExit().thenRun(abort);
            // dropped once connected, so that nothing of this fork stays reachable from the timer
            connectBy = new CompletableFuture<@Nullable Void>().completeOnTimeout(null, Math.max(1, (deadline - System.nanoTime()) / 1_000_000),
                    TimeUnit.MILLISECONDS);
            connectBy.thenRun(abort);
            SocketChannel out = null;
            SocketChannel err = null;
            try {
                for (int i = 0; i < 2; i++) {
                    SocketChannel s = server.accept();
                    byte[] hello = readFully(s, key.length() + 1);
                    String tag = new String(hello, StandardCharsets.US_ASCII);
                    if (tag.startsWith(key) && tag.endsWith("o") && out == null) {
                        out = s;
                    } else if (tag.startsWith(key) && tag.endsWith("e") && err == null) {
                        err = s;
                    } else {
                        closeQuietly(s);
                        throw new IOException("a connection to the stub's output socket carried a wrong key");
                    }
                }
            } catch (IOException e) {
                closeQuietly(out);
                closeQuietly(err);
                throw e;
            }
            connected.set(true);
            c.streams(Channels.newInputStream(out), Channels.newInputStream(err));
            return c;
        } catch (ExecutionException e) {
            throw new IOException("the stub template (pid " + pid() + ") could not fork: " + e.getCause().getMessage(), e.getCause());
        } catch (TimeoutException e) {
            throw new IOException("the stub template (pid " + pid() + ") did not fork within " + timeoutMillis + " ms", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while the stub template forked", e);
        } catch (IOException e) {
            if (child == null) {
                throw new IOException("the stub template (pid " + pid() + ") did not take the fork request: " + e.getMessage(), e);
            }
            throw new IOException("the stub forked by the template (pid " + pid() + ")"
                    + (child == null ? "" : ", pid " + child.pid() + (child.isAlive() ? "," : " and exited with code "
                    + child.exitValue() + ",")) + " did not connect its output: " + e.getMessage() + stderrSuffix(), e);
        } finally {
            connectBy.cancel(false);
            pending.remove(id);
            if (!connected.get() && child != null) {
                child.destroyForcibly();
            }
            try {
                Files.deleteIfExists(logSocket);
            } catch (IOException e) {
                log.debug("cannot delete {}", logSocket, e);
            }
        }
    }

    private static byte[] readFully(SocketChannel s, int n) throws IOException {
        ByteBuffer b = ByteBuffer.allocate(n);
        while (b.hasRemaining()) {
            if (s.read(b) < 0) {
                throw new IOException("the stub closed its output socket before it said who it was");
            }
        }
        return b.array();
    }

    private void readLoop() {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                String[] f = line.split(" ", 3);
                try {
                    switch (f[0]) {
                        case "ready" -> ready.complete(Long.parseLong(f[1]));
                        case "pong" -> answered();
                        case "forked" -> {
                            answered();
                            ForkedProcess c = new ForkedProcess(Long.parseLong(f[2]));
                            children.put(c.pid(), c);
                            CompletableFuture<ForkedProcess> r = pending.get(Long.parseLong(f[1]));
                            if (r == null || !r.complete(c)) {
                                c.destroyForcibly(); // its requester gave up (timeout)
                            }
                        }
                        case "error" -> {
                            answered();
                            CompletableFuture<ForkedProcess> r = pending.get(Long.parseLong(f[1]));
                            if (r != null) {
                                r.completeExceptionally(new IOException(f.length > 2 ? f[2] : "unknown error"));
                            }
                        }
                        case "exit" -> {
                            ForkedProcess c = children.remove(Long.parseLong(f[1]));
                            if (c != null) {
                                c.exited(ExitStatus.ofWaitStatus(Integer.parseInt(f[2].trim()))); // the raw waitpid status
                            }
                        }
                        default -> log.warn("python stub template (pid {}) said: {}", pid(), line);
                    }
                } catch (RuntimeException e) {
                    log.warn("python stub template (pid {}): cannot read the line '{}'", pid(), line, e);
                }
            }
        } catch (IOException e) {
            log.debug("python stub template (pid {}): control channel failed", pid(), e);
        } finally {
            goneNow();
        }
    }

    private void goneNow() {
        synchronized (requests) {
            gone = true;
        }
        ready.completeExceptionally(new IOException("the stub template exited"));
        IOException e = new IOException("the stub template (pid " + pid() + ") exited");
        pending.values().forEach(r -> r.completeExceptionally(e));
        for (ForkedProcess c : children.values()) {
            c.orphan();
        }
        children.clear();
    }

    private void stderrLoop() {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(process.getErrorStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                synchronized (stderrTail) {
                    stderrTail.addLast(line);
                    if (stderrTail.size() > TAIL_LINES) {
                        stderrTail.removeFirst();
                    }
                }
                log.warn("python stub template (pid {}): {}", pid(), line);
            }
        } catch (IOException e) {
            log.trace("template stderr closed", e);
        }
    }

    private String stderrSuffix() {
        synchronized (stderrTail) {
            return stderrTail.isEmpty() ? "" : "; template stderr:\n" + String.join("\n", stderrTail);
        }
    }

    /**
     * Closes the control channel (the template exits), then kills the template if it lingers, and its process group (a fork
     * caught before its own {@code setsid()}). Stubs it forked live on: each leads a group of its own, its instance's to end.
     */
    @Override
    public void close() {
        closing.countDown();
        synchronized (requests) {
            gone = true;
            closeQuietly(requests);
        }
        try {
            if (!process.waitFor(5, TimeUnit.SECONDS)) {
                group.kill();
                process.destroyForcibly();
                process.waitFor(10, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            process.destroyForcibly();
        }
        group.kill();
        join(reader);
        join(stderrPump);
        join(monitor);
    }

    private static void join(Thread t) {
        if (t.getState() == Thread.State.NEW || t == Thread.currentThread()) {
            return;
        }
        try {
            t.join(5000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    @Override
    public String toString() {
        return "StubTemplate[pid " + pid() + ", " + describe + "]";
    }

    private static void closeQuietly(@Nullable AutoCloseable c) {
        if (c != null) {
            try {
                c.close();
            } catch (Exception e) {
                log.trace("close failed", e);
            }
        }
    }

    private static byte[] randomBytes(int n) {
        byte[] b = new byte[n];
        RANDOM.nextBytes(b);
        return b;
    }
}
