package io.backplane.backend.python;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.MemoryType;
import io.backplane.spi.ResponseSender;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.MDC;

/**
 * One generation of a python stub: the child process, its control socket and its
 * shared-memory region.
 *
 * <p><b>Design.</b> Tensors and execution messages live in the region (host chunks written by
 * the host, stub chunks written by the stub); the Unix socket carries only small frames:
 * start-up handshake, heartbeats, log lines, decoupled responses, acknowledgements and wake-ups.
 * An execution is posted by writing its message into a host chunk and bumping
 * {@code TO_STUB_SEQ} in the control block; the stub spins on that word for {@code spin_us},
 * then sets {@code STUB_WAITING}, re-checks and blocks on the socket, so the host sends a WAKE
 * frame only to a sleeping stub. The result comes back the same way ({@code REPLY_SEQ},
 * {@code HOST_WAITING}, WAKE_HOST). A busy instance therefore pays no socket round trip, and an
 * idle one burns no CPU. A message of a few requests goes into one reusable host block (the
 * message scratch, back with the connection once its result is read; quarantined with an abandoned
 * execution), and the stub bump-allocates a plain result and its small outputs in a scratch block
 * of its own, reused once the host posts the next execution: small requests allocate nothing. The store-then-load pairs on both sides are separated by full fences
 * (volatile accesses here, a lock-prefixed atomic in Python), so no wake-up is lost; the host's
 * park is also timed as a safety net.
 *
 * <p>Concurrency: {@link #execute} runs on one core worker at a time (SPI contract); the reader
 * thread handles frames; the instance's monitor thread calls {@link #tick} (heartbeat,
 * watchdog, cancellation mirroring, stall recovery); the process-exit callback tears down.
 * Each request ends once from this side through {@link Req#hostDone} (compare-and-set). Its
 * shared memory is freed only when the stub is done with it ({@link Req#stubDone}) and its
 * execution has returned, or when the process is confirmed dead (region closed): memory of an
 * abandoned execution is quarantined, never reused while the stub may still touch it.
 * Every frame and result carries the generation and execution id; one that matches no live
 * request is dropped and acknowledged, never delivered elsewhere.
 *
 * <p>Flow control (DESIGN P9): each decoupled response costs the stub one of its response
 * credits, returned by the ACK. The ACK of a non-final response goes out only when the request's
 * {@link ResponseSender#ready()} completes (its client drained, or the request closed), from
 * whatever thread completes it; {@link #trySend} only queues, so that thread never blocks. A
 * stalled client therefore stalls its producer after at most the stub's credits.
 */
final class StubConnection {
    private static final Logger log = LoggerFactory.getLogger(StubConnection.class);
    private static final Logger stubLog = LoggerFactory.getLogger("io.backplane.backend.python.stub");
    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();
    private static final SecureRandom RANDOM = new SecureRandom();
    private static final DataType[] TYPES = DataType.values();
    private static final int TAIL_LINES = 20;
    /** Size of the reusable block that carries an execution message of a few requests (no allocation per request). */
    static final int MSG_SCRATCH_BYTES = 4096;

    /** Callbacks to the owning instance. */
    interface Owner {
        void onStubExit(StubConnection stub, String reason);

        void readinessChanged();

        /** An execution was posted: the monitor must run its rounds until the work ends. */
        void workStarted();

        /** Where the model's custom metrics go, or null when the host offers none. */
        default io.backplane.spi.metrics.@Nullable MetricRegistry metrics() {
            return null;
        }
    }

    static final class Execution {
        final long id;
        final List<Req> reqs = new ArrayList<>();
        final long startNanos = System.nanoTime();
        long seq;
        volatile @Nullable Thread waiter;
        volatile boolean resultSeen;
        volatile boolean abandoned;
        /** Counted down once {@link #failAll} has ended every request of this execution. */
        final java.util.concurrent.CountDownLatch failed = new java.util.concurrent.CountDownLatch(1);
        SharedRegion.@Nullable Block msgBlock;
        /** {@link #msgBlock} is the connection's message scratch block: it goes back to the connection, not to the region. */
        boolean msgInScratch;

        Execution(long id) {
            this.id = id;
        }
    }

    static final class Req {
        final ScheduledRequest sr;
        final int index;
        final Execution exec;
        final AtomicBoolean hostDone = new AtomicBoolean();
        final AtomicBoolean freed = new AtomicBoolean();
        final List<SharedRegion.Block> blocks = new ArrayList<>();
        volatile boolean stubDone;
        /** The stub released this request with RESCHEDULE: it runs again in a later execution, under a new Req. */
        volatile boolean rescheduled;
        SharedRegion.@Nullable Block cancelBlock;
        boolean cancelMirrored;

        Req(ScheduledRequest sr, int index, Execution exec) {
            this.sr = sr;
            this.index = index;
            this.exec = exec;
        }
    }

    private final Owner owner;
    private final int generation;
    private final StubSettings settings;
    private final String model;
    private final String instance;
    private final String tag;
    private final boolean decoupled;
    private final ReentrantReadWriteLock regionLock = new ReentrantReadWriteLock();
    private final LinkedBlockingQueue<ByteBuffer> outbox = new LinkedBlockingQueue<>();
    private final AtomicBoolean dead = new AtomicBoolean();
    private final CompletableFuture<Void> cleanedUp = new CompletableFuture<>();
    private final ConcurrentHashMap<Long, Execution> executions = new ConcurrentHashMap<>();
    /** Reqs whose request was rescheduled and may still be open (see {@link #reschedule(Req)}). */
    private final java.util.concurrent.ConcurrentLinkedQueue<Req> rescheduled = new java.util.concurrent.ConcurrentLinkedQueue<>();
    private final ArrayDeque<String> stderrTail = new ArrayDeque<>();
    private final AtomicLong droppedMessages = new AtomicLong();
    private @Nullable SharedRegion region;
    private @Nullable Process process;
    private @Nullable SocketChannel channel;
    private @Nullable Thread reader;
    private @Nullable Thread writer;
    private final List<Thread> pumps = new ArrayList<>();
    private MemorySegment ctl = MemorySegment.NULL;
    private final MemorySegment futexTimeout = Futex.timeout(java.lang.foreign.Arena.ofAuto(), 20);
    private long nextExecId = 1;
    /**
     * The message scratch block while no execution holds it. Taken by {@link #execute} for a message
     * that fits, given back when that execution's result has been read ({@link #processResult}); an
     * abandoned execution keeps it quarantined (DESIGN P4), and later messages are allocated.
     */
    private volatile SharedRegion.@Nullable Block msgScratch;
    private boolean msgScratchMade;
    /** Wake-ups the host sent to a sleeping stub (futex wakes and WAKE frames); execute's thread writes it. */
    private final AtomicLong stubWakeupsSent = new AtomicLong();
    private long toStubSeq;
    private volatile @Nullable Execution current;
    private volatile @Nullable Execution abandonedCurrent;
    private volatile @Nullable String killReason;
    // health (monitor thread, reader thread)
    private volatile boolean stalled;
    private volatile long stalledSinceNanos;
    private volatile long pingSentNanos;
    private long lastPingNanos;
    private long pingSeq;
    private final BlsBridge bls;

    StubConnection(Owner owner, int generation, StubSettings settings, String model, String instance, boolean decoupled) {
        this.owner = owner;
        this.generation = generation;
        this.settings = settings;
        this.model = model;
        this.instance = instance;
        this.decoupled = decoupled;
        this.tag = "model '" + model + "' instance '" + instance + "'";
        this.bls = new BlsBridge(new BlsLink(), owner.metrics());
    }

    /** What {@link BlsBridge} sees of this connection. */
    private final class BlsLink implements BlsBridge.Link {
        @Override
        public @Nullable ScheduledRequest openRequest(long execId, int index) {
            Execution e = executions.get(execId);
            if (e == null || e.abandoned || index >= e.reqs.size()) {
                return null;
            }
            Req r = e.reqs.get(index);
            return r.hostDone.get() ? null : r.sr;
        }

        @Override
        public boolean withRegion(java.util.function.Consumer<SharedRegion> body) {
            regionLock.readLock().lock();
            try {
                SharedRegion reg = region;
                if (reg == null || dead.get()) {
                    return false;
                }
                body.accept(reg);
                return true;
            } finally {
                regionLock.readLock().unlock();
            }
        }

        @Override
        public void send(byte type, byte[] payload) {
            trySend(type, payload);
        }

        @Override
        public String describe() {
            return StubConnection.this.describe();
        }
    }

    int generation() {
        return generation;
    }

    /** Whether both sides of this connection wake each other through futexes (else through the socket). */
    boolean futexWakeups() {
        MemorySegment c = ctl;
        return c != MemorySegment.NULL && c.get(ValueLayout.JAVA_LONG, Wire.W_HOST_FUTEX) == 1L
                && (long) LONG.getVolatile(c, Wire.W_STUB_FUTEX) == 1L;
    }

    /** Wake-ups sent to a sleeping stub so far (at most one per time it went to sleep, {@link #stubSleeps}). */
    long stubWakeupsSent() {
        return stubWakeupsSent.get();
    }

    /** How often the stub's main thread went to sleep for an execution (the stub counts it in the control block). */
    long stubSleeps() {
        return controlWord(Wire.W_STUB_SLEEPS);
    }

    /** How often a blocking call of the stub's sleep returned (a wake-up, or a spurious return). */
    long stubWakeups() {
        return controlWord(Wire.W_STUB_WAKEUPS);
    }

    /** Whether the stub's main thread is asleep, or about to sleep, waiting for an execution. */
    boolean stubSleeping() {
        return controlWord(Wire.W_STUB_WAITING) != 0;
    }

    /** Sends a heartbeat now and returns its sequence number; {@link #heartbeatAnswered} tells when the PONG came. */
    long heartbeat() {
        long seq;
        synchronized (this) {
            seq = ++pingSeq;
        }
        pingSentNanos = System.nanoTime();
        trySend(Wire.F_PING, new Wire.Out(8).u64(seq).toByteArray());
        return seq;
    }

    /** Whether the PONG of heartbeat {@code seq} arrived (or a later heartbeat superseded it). */
    boolean heartbeatAnswered(long seq) {
        return pingSentNanos == 0 || pingSeqSent() != seq;
    }

    private long controlWord(long word) {
        regionLock.readLock().lock();
        try {
            MemorySegment c = ctl;
            return c == MemorySegment.NULL || region == null || dead.get() ? -1 : (long) LONG.getVolatile(c, word);
        } finally {
            regionLock.readLock().unlock();
        }
    }

    long pid() {
        Process p = process;
        return p == null ? -1 : p.pid();
    }

    boolean isDead() {
        if (dead.get()) {
            return true;
        }
        Process p = process;
        return p != null && !p.isAlive(); // exited; the exit callback has not run yet
    }

    boolean isStalled() {
        return stalled;
    }

    /**
     * Host-chunk bytes held by executions (inputs, messages), including quarantined ones; the
     * message scratch block counts only while an execution holds it.
     */
    long allocatedBytes() {
        regionLock.readLock().lock();
        try {
            SharedRegion r = region;
            SharedRegion.Block idle = msgScratch;
            return r == null || dead.get() ? 0 : r.allocatedBytes() - (idle == null ? 0 : idle.size());
        } finally {
            regionLock.readLock().unlock();
        }
    }

    long droppedMessages() {
        return droppedMessages.get();
    }

    String describe() {
        return tag + " (python stub pid " + pid() + ", generation " + generation + ")";
    }

    // ------------------------------------------------------------------ start-up

    /**
     * Starts the process and runs the handshake and {@code initialize}. On failure everything
     * started is torn down and the exception names the cause (the Python error for
     * {@code initialize}, the stub's stderr for a crash).
     */
    void start(Path stubDir, Path socketDir, String initJson) {
        String token = HexFormat.of().formatHex(randomBytes(16));
        Path socketPath = socketDir.resolve("g" + generation + "-" + HexFormat.of().formatHex(randomBytes(6)) + ".sock");
        AtomicBoolean handshakeDone = new AtomicBoolean();
        AtomicBoolean timedOut = new AtomicBoolean();
        try {
            region = SharedRegion.create(generation, settings.shmInitialBytes(), settings.shmMaxBytes(), socketDir);
            ctl = region.control();
            ctl.set(ValueLayout.JAVA_LONG, Wire.W_HOST_FUTEX, Futex.available() ? 1L : 0L);
            ctl.set(ValueLayout.JAVA_LONG, Wire.W_STUB_SPIN_NS, settings.spinMicros() * 1000);
            try (ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
                server.bind(UnixDomainSocketAddress.of(socketPath));
                ProcessBuilder pb = new ProcessBuilder(settings.interpreter(), "-u", "-B", stubDir.resolve("backplane_stub.py").toString(),
                        "--socket", socketPath.toString(), "--prefix", region.prefix(), "--gen", Integer.toString(generation),
                        "--spin-us", Long.toString(settings.spinMicros()), "--shm-max", Long.toString(settings.shmMaxBytes()));
                Map<String, String> env = pb.environment();
                String pp = env.get("PYTHONPATH");
                env.put("PYTHONPATH", stubDir + (pp == null || pp.isEmpty() ? "" : ":" + pp));
                env.put("PYTHONUNBUFFERED", "1");
                env.put("BACKPLANE_STUB_TOKEN", token);
                try {
                    process = pb.start();
                } catch (IOException e) {
                    throw new BackplaneException(ErrorCode.UNAVAILABLE, tag + ": cannot start the python interpreter '"
                            + settings.interpreter() + "': " + e.getMessage() + "; install python3 with numpy or set '"
                            + StubSettings.INTERPRETER + "'", e);
                }
                Process p = process;
                startPump(p.getInputStream(), false);
                startPump(p.getErrorStream(), true);
                Runnable abort = () -> {
                    if (!handshakeDone.get()) {
                        closeQuietly(server);
                        closeQuietly(channel);
                    }
                };
                // An exit closes only the listening socket (a stub that died before connecting): one that connected may have
                // written its INIT_ERR just before exiting, and those frames stay readable until the connection's end of file.
                p.onExit().thenRun(() -> {
                    if (!handshakeDone.get()) {
                        closeQuietly(server);
                    }
                });
                CompletableFuture.delayedExecutor(settings.startupTimeoutMillis(), TimeUnit.MILLISECONDS).execute(() -> {
                    if (!handshakeDone.get()) {
                        timedOut.set(true);
                        abort.run();
                    }
                });
                channel = server.accept();
                Files.deleteIfExists(socketPath);
                ByteBuffer hello = readFrame(channel, Wire.F_HELLO);
                long gen = Integer.toUnsignedLong(hello.getInt());
                hello.getInt(); // pid
                int tlen = hello.getInt();
                if (tlen != token.length() || gen != generation) {
                    throw Wire.protocol("start-up handshake from an unexpected peer");
                }
                byte[] tb = new byte[tlen];
                hello.get(tb);
                if (!new String(tb, StandardCharsets.US_ASCII).equals(token)) {
                    throw Wire.protocol("start-up handshake carried a wrong token");
                }
                writeDirect(frame(Wire.F_INIT, initJson.getBytes(StandardCharsets.UTF_8)));
                // From here on only the writer writes: initialize() may already wait for host replies (custom metrics).
                Thread w = Thread.ofPlatform().daemon().name("backplane-python-writer-" + model + "-" + instance + "-g" + generation)
                        .unstarted(this::writeLoop);
                writer = w;
                w.start();
                ByteBuffer reply = readFrame(channel, (byte) 0);
                byte type = reply.get();
                while (type == Wire.F_LOG || type == Wire.F_METRIC) { // initialize() may log and create metrics
                    if (type == Wire.F_LOG) {
                        int level = reply.hasRemaining() ? reply.get() : 0;
                        logStub(level, StandardCharsets.UTF_8.decode(reply).toString());
                    } else {
                        bls.onFrame(type, MemorySegment.ofBuffer(reply.slice()));
                    }
                    reply = readFrame(channel, (byte) 0);
                    type = reply.get();
                }
                if (type == Wire.F_INIT_ERR) {
                    String err = StandardCharsets.UTF_8.decode(reply).toString();
                    throw new BackplaneException(ErrorCode.INTERNAL, tag + ": initialize() failed: " + firstLine(err) + "\n" + err);
                }
                if (type != Wire.F_INIT_OK) {
                    throw Wire.protocol("expected INIT_OK, got frame type " + type);
                }
                handshakeDone.set(true);
            }
        } catch (RuntimeException | IOException e) {
            handshakeDone.set(true);
            BackplaneException failure = startFailure(e, timedOut.get());
            killAndCleanUpAfterFailedStart();
            throw failure;
        }
        Thread r = Thread.ofPlatform().daemon().name("backplane-python-reader-" + model + "-" + instance + "-g" + generation)
                .unstarted(this::readLoop);
        reader = r;
        r.start();
        Process p = process;
        if (p != null) {
            Cores.stubStarted(p.pid());
            p.onExit().thenRun(() -> Cores.stubEnded(p.pid()));
            p.onExit().thenRun(this::onProcessExit);
        }
        log.info("{}: python stub started (pid {}, generation {}, region {})", tag, pid(), generation, region == null ? "" : region.prefix());
    }

    private BackplaneException startFailure(Exception e, boolean timedOut) {
        if (timedOut) {
            return new BackplaneException(ErrorCode.UNAVAILABLE, tag + ": the python stub did not finish start-up and initialize() within "
                    + settings.startupTimeoutMillis() + " ms ('" + StubSettings.STARTUP_TIMEOUT + "')" + stderrSuffix(), e);
        }
        if (e instanceof BackplaneException be && be.code() != ErrorCode.INTERNAL || e instanceof BackplaneException be2
                && be2.getMessage().contains("initialize() failed")) {
            return (BackplaneException) e;
        }
        Process p = process;
        String exit = "";
        if (p != null) {
            try {
                if (p.waitFor(2, TimeUnit.SECONDS)) {
                    exit = " (the stub exited with code " + p.exitValue() + ")";
                }
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
            }
        }
        joinPumps();
        return new BackplaneException(ErrorCode.UNAVAILABLE, tag + ": the python stub failed during start-up" + exit + ": "
                + (e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage()) + stderrSuffix(), e);
    }

    private void killAndCleanUpAfterFailedStart() {
        dead.set(true);
        Process p = process;
        if (p != null) {
            p.destroyForcibly();
            try {
                p.waitFor(10, TimeUnit.SECONDS);
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
            }
        }
        closeQuietly(channel);
        Thread w = writer;
        if (w != null) {
            w.interrupt();
            try {
                w.join(5000);
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
            }
        }
        joinPumps();
        if (region != null) {
            region.close();
        }
        cleanedUp.complete(null);
    }

    private static String firstLine(String s) {
        int i = s.indexOf('\n');
        return i < 0 ? s : s.substring(0, i);
    }

    private String stderrSuffix() {
        synchronized (stderrTail) {
            return stderrTail.isEmpty() ? "" : "; stub stderr:\n" + String.join("\n", stderrTail);
        }
    }

    private void startPump(InputStream in, boolean stderr) {
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
                            logStub(stderr ? 1 : 0, line);
                        }
                    } catch (IOException e) {
                        log.debug("{}: stub output pump ended", tag, e);
                    }
                });
        pumps.add(t);
        t.start();
    }

    private void joinPumps() {
        for (Thread t : pumps) {
            try {
                t.join(2000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    private void logStub(int level, String text) {
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

    // ------------------------------------------------------------------ socket frames

    private static ByteBuffer readFrame(SocketChannel ch, byte expected) throws IOException {
        ByteBuffer head = ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN);
        readFully(ch, head);
        int n = head.flip().getInt();
        if (n < 1 || n > Wire.MAX_FRAME) {
            throw Wire.protocol("frame length " + n + " out of range");
        }
        ByteBuffer body = ByteBuffer.allocate(n).order(ByteOrder.LITTLE_ENDIAN);
        readFully(ch, body);
        body.flip();
        if (expected != 0) {
            byte type = body.get();
            if (type != expected) {
                throw Wire.protocol("expected frame type " + expected + ", got " + type);
            }
        }
        return body;
    }

    /**
     * The reader's frames, read in bulk: one read takes every frame the stub has sent so far (a
     * wake-up of the reader delivers them all), and each frame is copied into its own buffer, as
     * {@link #readFrame} gives it.
     */
    private static final class FrameReader {
        private final ByteBuffer buf = ByteBuffer.allocate(64 << 10).order(ByteOrder.LITTLE_ENDIAN).flip();

        ByteBuffer next(SocketChannel ch) throws IOException {
            fill(ch, 4);
            int n = buf.getInt(buf.position());
            if (n < 1 || n > Wire.MAX_FRAME) {
                throw Wire.protocol("frame length " + n + " out of range");
            }
            ByteBuffer body = ByteBuffer.allocate(n).order(ByteOrder.LITTLE_ENDIAN);
            buf.position(buf.position() + 4);
            int now = Math.min(n, buf.remaining());
            body.put(body.position(), buf, buf.position(), now).position(now);
            buf.position(buf.position() + now);
            readFully(ch, body); // the rest of a frame larger than what was buffered
            return body.flip();
        }

        /** Makes at least {@code need} bytes available, reading as much as the socket has. */
        private void fill(SocketChannel ch, int need) throws IOException {
            if (buf.remaining() >= need) {
                return;
            }
            buf.compact();
            while (buf.position() < need) {
                if (ch.read(buf) < 0) {
                    throw new IOException("the python stub closed its connection");
                }
            }
            buf.flip();
        }
    }

    private static void readFully(SocketChannel ch, ByteBuffer b) throws IOException {
        while (b.hasRemaining()) {
            if (ch.read(b) < 0) {
                throw new IOException("the python stub closed its connection");
            }
        }
    }

    private static ByteBuffer frame(byte type, byte[] payload) {
        ByteBuffer b = ByteBuffer.allocate(5 + payload.length).order(ByteOrder.LITTLE_ENDIAN);
        return b.putInt(payload.length + 1).put(type).put(payload).flip();
    }

    /** Start-up only (INIT), before the reader and writer threads exist. */
    private void writeDirect(ByteBuffer b) throws IOException {
        SocketChannel ch = channel;
        if (ch == null) {
            throw new IOException("not connected");
        }
        while (b.hasRemaining()) {
            ch.write(b);
        }
    }

    /**
     * Queues a frame for the writer thread, the only thread that writes to the socket after
     * start-up. No caller blocks on the socket and no lock is held across a write: the reader
     * stays free to read (so the stub's sends always drain), and the stub's reader never writes
     * either, so the two directions cannot wait on each other. The queue is bounded in practice:
     * ACKs by the stub's response credits, PINGs by the heartbeat interval, WAKEs by executions.
     */
    private void writeFrame(byte type, byte[] payload) throws IOException {
        if (channel == null || dead.get()) {
            throw new IOException("not connected");
        }
        outbox.add(frame(type, payload));
    }

    private void writeLoop() {
        SocketChannel ch = channel;
        try {
            List<ByteBuffer> batch = new ArrayList<>();
            while (ch != null && !dead.get()) {
                batch.add(outbox.take());
                outbox.drainTo(batch, 255); // every frame queued so far goes out in one gathering write
                ByteBuffer[] bufs = batch.toArray(ByteBuffer[]::new);
                ByteBuffer last = bufs[bufs.length - 1];
                while (last.hasRemaining()) {
                    ch.write(bufs);
                }
                batch.clear();
            }
        } catch (InterruptedException e) {
            // teardown
        } catch (IOException e) {
            log.debug("{}: control connection closed for writing", tag, e);
        } finally {
            outbox.clear();
        }
    }

    private void trySend(byte type, byte[] payload) {
        try {
            writeFrame(type, payload);
        } catch (IOException e) {
            log.debug("{}: cannot send frame {} to the stub", tag, type, e);
        }
    }

    private void readLoop() {
        SocketChannel ch = channel;
        FrameReader frames = new FrameReader();
        try {
            while (ch != null) {
                ByteBuffer f = frames.next(ch);
                byte type = f.get();
                switch (type) {
                    case Wire.F_PONG -> {
                        if (f.remaining() >= 8 && f.getLong() == pingSeqSent()) {
                            pingSentNanos = 0;
                        }
                    }
                    case Wire.F_WAKE_HOST -> {
                        Execution c = current;
                        Thread w = c == null ? null : c.waiter;
                        if (w != null) {
                            LockSupport.unpark(w);
                        }
                    }
                    case Wire.F_RESPONSE -> onResponseFrame(MemorySegment.ofBuffer(f.slice()));
                    case Wire.F_LOG -> {
                        int level = f.hasRemaining() ? f.get() : 0;
                        logStub(level, StandardCharsets.UTF_8.decode(f).toString());
                    }
                    case Wire.F_FINALIZED -> log.debug("{}: finalize() completed", tag);
                    case Wire.F_BLS, Wire.F_BLS_CANCEL, Wire.F_METRIC, Wire.F_HOST_FREE -> bls.onFrame(type, MemorySegment.ofBuffer(f.slice()));
                    default -> throw Wire.protocol("unexpected frame type " + type);
                }
            }
        } catch (IOException | RuntimeException e) {
            if (!dead.get() && killReason == null) {
                if (e instanceof IOException && exitsSoon()) {
                    return; // a crash: the exit callback reports it with the exit status
                }
                String reason = e instanceof BackplaneException ? e.getMessage() : "closed its control connection (" + e.getMessage() + ")";
                kill(reason);
            }
        }
    }

    private boolean exitsSoon() {
        Process p = process;
        try {
            return p != null && p.waitFor(2, TimeUnit.SECONDS);
        } catch (InterruptedException ie) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    private synchronized long pingSeqSent() {
        return pingSeq;
    }

    // ------------------------------------------------------------------ executing

    /** Runs one batch; returns when the stub's execute() returned or the stub was given up. */
    void execute(List<ScheduledRequest> batch) {
        Execution pending = null;
        Execution posted = null;
        regionLock.readLock().lock();
        try {
            SharedRegion reg = region;
            if (dead.get() || stalled || reg == null) {
                BackplaneException err = BackplaneException.unavailable(describe() + " is not serving (" + (stalled ? "stalled" : "exited") + ")");
                for (ScheduledRequest sr : batch) {
                    failDirect(sr, err);
                }
                return;
            }
            settleRescheduled(reg);
            Execution e = new Execution(nextExecId++);
            Wire.Out reqs = new Wire.Out(256);
            for (ScheduledRequest sr : batch) {
                if (sr.sender().isClosed()) {
                    continue;
                }
                Req r = new Req(sr, e.reqs.size(), e);
                try {
                    encodeRequest(reg, r, reqs);
                } catch (RuntimeException ex) {
                    releaseBlocks(reg, r);
                    failDirect(sr, BackplaneException.wrap(ex, describe() + ": cannot pass the request to the stub"));
                    continue;
                }
                if (e.reqs.size() == 0xFFFF) {
                    failDirect(sr, BackplaneException.invalid("batch holds more than 65535 requests"));
                    releaseBlocks(reg, r);
                    continue;
                }
                e.reqs.add(r);
            }
            if (e.reqs.isEmpty()) {
                return;
            }
            Wire.Out msg = new Wire.Out(reqs.size() + 16);
            msg.u32(generation).u64(e.id).u16(e.reqs.size());
            msg.write(reqs.buffer(), 0, reqs.size());
            try {
                if (!msgScratchMade) {
                    msgScratchMade = true;
                    msgScratch = reg.allocate(MSG_SCRATCH_BYTES);
                }
                SharedRegion.Block scratch = msgScratch;
                if (scratch != null && msg.size() <= MSG_SCRATCH_BYTES) {
                    msgScratch = null;
                    e.msgInScratch = true;
                    e.msgBlock = scratch;
                } else {
                    e.msgBlock = reg.allocate(msg.size());
                }
            } catch (RuntimeException ex) {
                for (Req r : e.reqs) {
                    releaseBlocks(reg, r);
                    failDirect(r.sr, BackplaneException.wrap(ex, describe()));
                }
                return;
            }
            MemorySegment.copy(msg.buffer(), 0, reg.hostSegment(e.msgBlock), ValueLayout.JAVA_BYTE, 0, msg.size());
            e.seq = ++toStubSeq;
            e.waiter = Thread.currentThread();
            executions.put(e.id, e);
            posted = e;
            current = e;
            owner.workStarted();
            ctl.set(ValueLayout.JAVA_LONG, Wire.W_MSG_CHUNK, e.msgBlock.chunk());
            ctl.set(ValueLayout.JAVA_LONG, Wire.W_MSG_OFF, e.msgBlock.offset());
            ctl.set(ValueLayout.JAVA_LONG, Wire.W_MSG_LEN, msg.size());
            // How long the stub may spin for its next execution once this one is done: decided by the
            // cores free now, for every stub of this JVM together (Cores).
            ctl.set(ValueLayout.JAVA_LONG, Wire.W_STUB_SPIN_NS, Cores.stubSpinNanos(settings.spinMicros() * 1000));
            Cores.executionPosted();
            boolean got;
            try {
                LONG.setVolatile(ctl, Wire.W_TO_STUB_SEQ, e.seq);
                long waiting = (long) LONG.getVolatile(ctl, Wire.W_STUB_WAITING);
                if (waiting == Wire.WAITING_FUTEX) {
                    stubWakeupsSent.incrementAndGet();
                    Futex.wakeAll(ctl.asSlice(Wire.W_TO_STUB_SEQ, 4));
                } else if (waiting != 0) {
                    stubWakeupsSent.incrementAndGet();
                    trySend(Wire.F_WAKE, new byte[0]);
                }
                got = awaitReply(e, waiting != 0);
            } finally {
                Cores.executionReturned();
            }
            if (got) {
                synchronized (e) {
                    processResult(reg, e, !e.abandoned);
                }
            } else {
                awaitFailed(e);
            }
            pending = got && !decoupled ? e : null;
        } finally {
            current = null;
            regionLock.readLock().unlock();
        }
        if (pending != null) {
            awaitSenders(pending);
        }
        if (posted != null && posted.abandoned) {
            // failAll marks an execution abandoned before it ends its requests: a result that arrived
            // just before a stall, or a wait for senders cut short by one, must not return before those
            // requests ended, or the core answers them itself with the wrong error (L6)
            awaitFailed(posted);
        }
    }

    /**
     * A plain model may return None from execute() and send a request's one response and FINAL
     * later through its response sender (Triton allows it): the batch is not over until each
     * request ended, so the core's missing-response rule (L6) sees only real omissions. A
     * cancelled request ends at once with CANCELLED. Ends early when the host interrupts the
     * worker (unload, watchdog) or the stub dies; those paths fail what is still open.
     */
    private void awaitSenders(Execution e) {
        while (!dead.get() && !e.abandoned && !Thread.currentThread().isInterrupted()) {
            boolean open = false;
            for (Req r : e.reqs) {
                if (!r.hostDone.get() && r.sr.isCancelled()) {
                    // The client gave up: end it now; a late FINAL from the stub is dropped. Its memory
                    // stays quarantined until the stub sends that FINAL or ends.
                    finish(r, InferenceResponse.error(new BackplaneException(ErrorCode.CANCELLED, "request " + r.sr.id()
                            + " was cancelled while " + describe() + " had yet to answer it through its response sender")));
                }
                if (!r.hostDone.get()) {
                    open = true;
                }
            }
            if (!open) {
                return;
            }
            LockSupport.parkNanos(e, 50_000_000);
        }
    }

    /**
     * The stub died or stalled: the thread that noticed fails every open request (failAll), and
     * execute must not return before that thread has ended this execution's requests, or the host
     * would find them unanswered (L6) and answer them itself with the wrong error.
     */
    private void awaitFailed(Execution e) {
        try {
            if (e.failed.await(settings.heartbeatTimeoutMillis() + 5_000, java.util.concurrent.TimeUnit.MILLISECONDS)) {
                return;
            }
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
        }
        BackplaneException err = BackplaneException.unavailable(describe() + " stopped serving while requests were in flight");
        for (Req r : e.reqs) {
            finish(r, InferenceResponse.error(err));
        }
    }

    private void encodeRequest(SharedRegion reg, Req r, Wire.Out out) {
        ScheduledRequest sr = r.sr;
        var req = sr.request();
        SharedRegion.Block cb = reg.allocate(8);
        r.cancelBlock = cb;
        reg.hostSegment(cb).set(ValueLayout.JAVA_LONG, 0, sr.isCancelled() ? 1L : 0L);
        r.cancelMirrored = sr.isCancelled();
        out.u64(sr.id()).str(req.id()).str(Wire.sequence(req)).str(Wire.json(req.parameters()));
        out.u32(cb.chunk()).u64(cb.offset());
        out.u16(req.requestedOutputs().size());
        for (String n : req.requestedOutputs()) {
            out.str(n);
        }
        out.u16(req.inputs().size());
        for (Tensor t : req.inputs()) {
            if (t.memoryType() == MemoryType.GPU) {
                throw new BackplaneException(ErrorCode.UNSUPPORTED, "input '" + t.name() + "' is in GPU memory; the python backend takes host tensors");
            }
            long n = t.byteSize();
            out.str(t.name()).u8(t.dataType().ordinal()).u8(t.rank());
            for (int i = 0; i < t.rank(); i++) {
                out.u64(t.dim(i));
            }
            if (n > 0) {
                SharedRegion.Block b = reg.allocate(n);
                r.blocks.add(b);
                MemorySegment.copy(t.data(), 0, reg.hostSegment(b), 0, n);
                out.u32(b.chunk()).u64(b.offset()).u64(n);
            } else {
                out.u32(0).u64(0).u64(0);
            }
        }
    }

    /**
     * Waits for the stub's result: spins while {@link Cores} grants a spin (never with more busy
     * stubs and spinning host threads than free cores), then sleeps on the reply word's futex (or
     * parks for the socket's WAKE_HOST where the stub or the JVM has no futex).
     */
    private boolean awaitReply(Execution e, boolean wokeStub) {
        boolean spin = settings.spinMicros() > 0 && Cores.tryEnterHostSpin();
        // A stub we had to wake answers a wake-up later: a spin as short as usual would end before that and
        // put this thread to sleep too, so the stub would have to wake it, and each side's late wake-up
        // would make the other fall asleep again, request after request.
        long spinEnd = spin ? System.nanoTime() + settings.spinMicros() * 1000 * (wokeStub ? AFTER_WAKE_SPIN_FACTOR : 1) : 0;
        boolean futex = ctl.get(ValueLayout.JAVA_LONG, Wire.W_HOST_FUTEX) == 1L && ctl.get(ValueLayout.JAVA_LONG, Wire.W_STUB_FUTEX) == 1L;
        boolean waiting = false;
        try {
            while (true) {
                long reply = (long) LONG.getVolatile(ctl, Wire.W_REPLY_SEQ);
                if (reply == e.seq) {
                    return true;
                }
                if (e.abandoned || dead.get()) {
                    return false;
                }
                if (Thread.currentThread().isInterrupted()) {
                    // The host gave up on this execute (its watchdog, unload): abandon it like a stall.
                    stall("had execute() interrupted by the host");
                    return false;
                }
                if (!waiting) {
                    if (spin && System.nanoTime() < spinEnd) {
                        Thread.onSpinWait();
                    } else {
                        if (spin) {
                            spin = false;
                            Cores.exitHostSpin();
                        }
                        LONG.setVolatile(ctl, Wire.W_HOST_WAITING, futex ? Wire.WAITING_FUTEX : 1L);
                        waiting = true;
                    }
                    continue;
                }
                if (futex) {
                    // Bounded so that a dead stub, an abandoned execution or an interrupt is seen.
                    Futex.await(ctl.asSlice(Wire.W_REPLY_SEQ, 4), (int) reply, futexTimeout);
                } else {
                    LockSupport.parkNanos(1_000_000);
                }
            }
        } finally {
            if (spin) {
                Cores.exitHostSpin();
            }
            if (waiting) {
                LONG.setVolatile(ctl, Wire.W_HOST_WAITING, 0L);
            }
        }
    }

    /** Reads the result of {@code e} from the region; delivers it unless the execution was abandoned. */
    private void processResult(SharedRegion reg, Execution e, boolean deliver) {
        if (e.resultSeen) {
            return;
        }
        try {
            long exec = ctl.get(ValueLayout.JAVA_LONG, Wire.W_REPLY_EXEC);
            if (exec != e.id) {
                throw Wire.protocol("result for execution " + exec + " arrived where " + e.id + " was expected");
            }
            MemorySegment m = reg.stubSlice(ctl.get(ValueLayout.JAVA_LONG, Wire.W_REPLY_CHUNK),
                    ctl.get(ValueLayout.JAVA_LONG, Wire.W_REPLY_OFF), ctl.get(ValueLayout.JAVA_LONG, Wire.W_REPLY_LEN));
            Wire.In in = new Wire.In(m);
            long gen = in.u32();
            long id = in.u64();
            int n = in.u16();
            if (gen != generation || id != e.id || n != e.reqs.size()) {
                throw Wire.protocol("result header (generation " + gen + ", execution " + id + ", " + n + " requests) does not match"
                        + " generation " + generation + ", execution " + e.id + ", " + e.reqs.size() + " requests");
            }
            List<InferenceResponse> finals = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                int state = in.u8();
                switch (state) {
                    case 0 -> finals.add(null);
                    case 1 -> finals.add(decodeResponse(reg, in, e.reqs.get(i)));
                    case 2 -> finals.add(null);
                    case 3 -> {
                        finals.add(null);
                        e.reqs.get(i).rescheduled = true;
                    }
                    default -> throw Wire.protocol("request state " + state + " is unknown");
                }
                if (state != 0) {
                    e.reqs.get(i).stubDone = true;
                }
            }
            e.resultSeen = true;
            for (int i = 0; i < n; i++) {
                InferenceResponse resp = finals.get(i);
                Req r = e.reqs.get(i);
                if (r.rescheduled && deliver) {
                    reschedule(r);
                }
                if (resp != null) {
                    if (deliver) {
                        finish(r, resp);
                    } else {
                        droppedMessages.incrementAndGet();
                    }
                }
            }
        } catch (BackplaneException ex) {
            e.resultSeen = true;
            for (Req r : e.reqs) {
                r.stubDone = true;
                finish(r, InferenceResponse.error(new BackplaneException(ErrorCode.INTERNAL, describe() + ": " + ex.getMessage(), ex)));
            }
            kill(ex.getMessage());
        }
        SharedRegion.Block mb = e.msgBlock;
        if (mb != null) {
            e.msgBlock = null;
            if (e.msgInScratch) {
                msgScratch = mb;
            } else {
                reg.free(mb);
            }
        }
        for (Req r : e.reqs) {
            maybeRelease(reg, r);
        }
    }

    private InferenceResponse decodeResponse(SharedRegion reg, Wire.In in, Req r) {
        int hasError = in.u8();
        if (hasError == 1) {
            ErrorCode code = Wire.errorCode(in.u8());
            String msg = in.str();
            return InferenceResponse.error(new BackplaneException(code, msg));
        }
        if (hasError != 0) {
            throw Wire.protocol("response kind " + hasError + " is unknown");
        }
        int count = in.u16();
        List<String> wanted = r.sr.request().requestedOutputs();
        List<Tensor> outs = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            String name = in.str();
            int code = in.u8();
            int ndim = in.u8();
            if (code >= TYPES.length) {
                throw Wire.protocol("output '" + name + "' has datatype code " + code);
            }
            long[] shape = new long[ndim];
            for (int d = 0; d < ndim; d++) {
                shape[d] = in.u64();
            }
            long chunk = in.u32();
            long off = in.u64();
            long nbytes = in.u64();
            MemorySegment data = reg.stubSlice(chunk, off, nbytes);
            if (!wanted.isEmpty() && !wanted.contains(name)) {
                continue;
            }
            MemorySegment copy = MemorySegment.ofArray(data.toArray(ValueLayout.JAVA_BYTE));
            try {
                outs.add(Tensor.of(name, TYPES[code], shape, copy));
            } catch (BackplaneException ex) {
                throw Wire.protocol("output '" + name + "': " + ex.getMessage());
            }
        }
        return InferenceResponse.of(outs, StubJson.parameters(in.str()));
    }

    private void onResponseFrame(MemorySegment payload) {
        regionLock.readLock().lock();
        try {
            SharedRegion reg = region;
            if (reg == null || dead.get()) {
                return;
            }
            Wire.In in = new Wire.In(payload);
            long gen = in.u32();
            long execId = in.u64();
            int index = in.u16();
            boolean fin = in.u8() == 1;
            boolean has = in.u8() == 1;
            Execution e = executions.get(execId);
            Req r = e != null && gen == generation && index < e.reqs.size() ? e.reqs.get(index) : null;
            InferenceResponse resp = null;
            if (has) {
                resp = r == null ? skipResponse(reg, in) : decodeResponse(reg, in, r);
            }
            long token = in.u64();
            // Every response is acknowledged: the ACK frees the stub's blocks (token != 0) and
            // returns the response credit the stub spent on it (flow control, DESIGN P9). A
            // non-final response that reached its request is acknowledged only once the request's
            // consumer is ready for more, so a slow client holds the credits and slows the model;
            // a FINAL, an error and a dropped response are acknowledged at once.
            byte[] ack = new Wire.Out(8).u64(token).toByteArray();
            if (r == null) {
                trySend(Wire.F_ACK, ack);
                droppedMessages.incrementAndGet();
                log.debug("{}: dropped a response for unknown execution {} index {} (generation {})", tag, execId, index, gen);
                return;
            }
            if (fin) {
                r.stubDone = true;
            }
            java.util.concurrent.CompletionStage<Void> consumer = null;
            try {
                if (e.abandoned || r.hostDone.get()) {
                    droppedMessages.incrementAndGet();
                } else if (fin) {
                    finish(r, resp);
                } else if (resp != null) {
                    try {
                        r.sr.sender().send(resp, 0);
                        consumer = resp.isError() ? null : consumerReady(r);
                    } catch (IllegalStateException ex) {
                        log.debug("{}: response for a closed request dropped", tag, ex);
                    }
                }
            } finally {
                if (consumer == null) {
                    trySend(Wire.F_ACK, ack);
                } else {
                    // trySend only queues for the writer thread: safe from whatever thread completes the stage.
                    consumer.whenComplete((v, t) -> trySend(Wire.F_ACK, ack));
                }
            }
            if (fin) {
                maybeRelease(reg, r);
            }
        } finally {
            regionLock.readLock().unlock();
        }
    }

    /** When {@code r}'s consumer can take more; null (acknowledge at once) when the sender cannot tell. */
    private java.util.concurrent.@Nullable CompletionStage<Void> consumerReady(Req r) {
        try {
            return r.sr.sender().ready();
        } catch (RuntimeException ex) {
            log.warn("{}: the response sender of request {} failed to say whether its client is ready; not waiting for it", tag, r.sr.id(), ex);
            return null;
        }
    }

    private InferenceResponse skipResponse(SharedRegion reg, Wire.In in) {
        int hasError = in.u8();
        if (hasError == 1) {
            in.u8();
            in.str();
            return InferenceResponse.of(List.of());
        }
        int count = in.u16();
        for (int i = 0; i < count; i++) {
            in.str();
            in.u8();
            int ndim = in.u8();
            for (int d = 0; d < ndim; d++) {
                in.u64();
            }
            reg.stubSlice(in.u32(), in.u64(), in.u64());
        }
        in.str();
        return InferenceResponse.of(List.of());
    }

    /**
     * The model released {@code r} with RESCHEDULE: the core runs it again after this execute
     * returns, under a new Req. This one stays open, so that a response the stub sent through it
     * before the release, and that the reader thread has yet to handle, still reaches the request;
     * {@link #settleRescheduled} retires it once the request has ended.
     */
    private void reschedule(Req r) {
        try {
            r.sr.reschedule();
        } catch (RuntimeException ex) {
            r.rescheduled = false;
            finish(r, InferenceResponse.error(BackplaneException.wrap(ex, describe() + " cannot reschedule request " + r.sr.id())));
            return;
        }
        rescheduled.add(r);
    }

    /** Retires the Reqs of rescheduled requests that have ended since (worker thread, region read-locked). */
    private void settleRescheduled(SharedRegion reg) {
        for (java.util.Iterator<Req> it = rescheduled.iterator(); it.hasNext(); ) {
            Req r = it.next();
            if (r.sr.sender().isClosed()) {
                it.remove();
                r.hostDone.set(true);
                maybeRelease(reg, r);
            }
        }
    }

    /** Ends {@code r} with {@code resp} (null: FINAL without a response) unless it already ended. */
    private void finish(Req r, @Nullable InferenceResponse resp) {
        if (!r.hostDone.compareAndSet(false, true)) {
            return;
        }
        try {
            r.sr.sender().send(resp, ResponseSender.FINAL);
        } catch (RuntimeException ex) {
            log.debug("{}: request {} had already ended", tag, r.sr.id(), ex);
        }
        Execution e = r.exec;
        Thread w = decoupled ? null : e.waiter;
        if (w != null && w != Thread.currentThread()) {
            LockSupport.unpark(w); // awaitSenders
        }
        if (e.resultSeen && allSettled(e)) {
            executions.remove(e.id, e);
        }
    }

    private static void failDirect(ScheduledRequest sr, BackplaneException err) {
        try {
            sr.sender().sendError(err);
        } catch (RuntimeException ex) {
            log.debug("request {} had already ended", sr.id(), ex);
        }
    }

    private void maybeRelease(SharedRegion reg, Req r) {
        if (r.stubDone && r.exec.resultSeen && r.freed.compareAndSet(false, true)) {
            releaseBlocks(reg, r);
        }
        Execution e = r.exec;
        if (e.resultSeen && allSettled(e)) {
            executions.remove(e.id, e);
        }
    }

    private static boolean allSettled(Execution e) {
        for (Req r : e.reqs) {
            if (!r.freed.get() || !r.hostDone.get()) {
                return false;
            }
        }
        return true;
    }

    private static void releaseBlocks(SharedRegion reg, Req r) {
        for (SharedRegion.Block b : r.blocks) {
            reg.free(b);
        }
        r.blocks.clear();
        SharedRegion.Block cb = r.cancelBlock;
        if (cb != null) {
            reg.free(cb);
            r.cancelBlock = null;
        }
    }

    // ------------------------------------------------------------------ health

    /**
     * One monitor round: cancellation mirroring, heartbeat, execute watchdog, stall recovery or
     * kill. Returns whether the stub has work (the monitor parks without a timeout otherwise).
     */
    boolean tick(long now) {
        if (dead.get()) {
            return false;
        }
        boolean busy = stalled || current != null || hasOpenRequests();
        if (!busy) {
            pingSentNanos = 0;
            return false;
        }
        regionLock.readLock().lock();
        try {
            SharedRegion reg = region;
            if (reg == null || dead.get()) {
                return false;
            }
            for (Execution e : executions.values()) {
                for (Req r : e.reqs) {
                    if (!r.cancelMirrored && !r.freed.get() && r.sr.isCancelled()) {
                        SharedRegion.Block cb = r.cancelBlock;
                        if (cb != null) {
                            reg.hostSegment(cb).set(ValueLayout.JAVA_LONG, 0, 1L);
                        }
                        r.cancelMirrored = true;
                    }
                }
            }
            long sent = pingSentNanos;
            if (sent == 0) {
                if (now - lastPingNanos >= settings.heartbeatIntervalMillis() * 1_000_000) {
                    long seq;
                    synchronized (this) {
                        seq = ++pingSeq;
                    }
                    lastPingNanos = now;
                    pingSentNanos = now;
                    trySend(Wire.F_PING, new Wire.Out(8).u64(seq).toByteArray());
                }
            } else if (!stalled && now - sent > settings.heartbeatTimeoutMillis() * 1_000_000) {
                stall("sent no heartbeat for " + (now - sent) / 1_000_000 + " ms (" + StubSettings.HEARTBEAT_TIMEOUT + "="
                        + settings.heartbeatTimeoutMillis() + "); it is stopped or hung");
            }
            Execution c = current;
            long limit = settings.executeTimeoutMillis();
            if (!stalled && c != null && limit > 0 && now - c.startNanos > limit * 1_000_000) {
                stall("execute() ran longer than " + StubSettings.EXECUTE_TIMEOUT + "=" + limit + " ms");
            }
            if (stalled) {
                Execution a = abandonedCurrent;
                if (a != null && !a.resultSeen && (long) LONG.getVolatile(ctl, Wire.W_REPLY_SEQ) == a.seq) {
                    synchronized (a) {
                        processResult(reg, a, false);
                    }
                    log.info("{}: the abandoned execution {} ended late; its results were dropped", describe(), a.id);
                }
                if ((a == null || a.resultSeen) && pingSentNanos == 0 && current == null) {
                    abandonedCurrent = null;
                    stalled = false;
                    log.warn("{}: the python stub responds again; the instance serves again", describe());
                    owner.readinessChanged();
                } else if (now - stalledSinceNanos > settings.stallKillMillis() * 1_000_000) {
                    kill("did not recover within " + StubSettings.STALL_KILL + "=" + settings.stallKillMillis() + " ms of being"
                            + " declared unhealthy");
                }
            }
            return true;
        } finally {
            regionLock.readLock().unlock();
        }
    }

    /** Whether the monitor has something to watch here: a stall, an execution or an open request. */
    boolean hasWork() {
        return !dead.get() && (stalled || current != null || hasOpenRequests());
    }

    /** How much longer than {@code spin_us} a side spins after it had to wake the other ({@link #awaitReply}). */
    static final int AFTER_WAKE_SPIN_FACTOR = 4;

    private boolean hasOpenRequests() {
        for (Execution e : executions.values()) {
            for (Req r : e.reqs) {
                if (!r.hostDone.get()) {
                    return true;
                }
            }
        }
        return false;
    }

    /** Fails everything open on this stub and quarantines its in-flight memory; see the class comment. */
    private synchronized void stall(String reason) {
        if (stalled) {
            return;
        }
        stalledSinceNanos = System.nanoTime();
        stalled = true;
        Execution c = current;
        abandonedCurrent = c;
        String message = describe() + " " + reason;
        log.warn("{}: failing its open requests; it is killed unless it recovers within {} ms", message, settings.stallKillMillis());
        failAll(BackplaneException.unavailable(message));
        owner.readinessChanged();
    }

    private void failAll(BackplaneException err) {
        for (Execution e : executions.values()) {
            e.abandoned = true;
            for (Req r : e.reqs) {
                finish(r, InferenceResponse.error(err));
            }
            e.failed.countDown();
            Thread w = e.waiter;
            if (w != null) {
                LockSupport.unpark(w);
            }
        }
    }

    /** Kills the process (SIGKILL); {@link #onProcessExit} then fails what is open and cleans up. */
    void kill(String reason) {
        boolean first;
        synchronized (this) {
            first = killReason == null;
            if (first) {
                killReason = reason;
            }
        }
        Process p = process;
        if (p != null && p.isAlive()) {
            if (first) {
                log.warn("{}: killing the python stub: {}", describe(), reason);
            }
            p.destroyForcibly();
        }
    }

    private void onProcessExit() {
        if (!dead.compareAndSet(false, true)) {
            return;
        }
        Process p = process;
        int code = p == null ? -1 : p.exitValue();
        String reason = killReason != null ? "was killed: " + killReason
                : "exited with code " + code + (code > 128 ? " (signal " + (code - 128) + ")" : "");
        try {
            failAll(BackplaneException.unavailable(describe() + " " + reason + " while requests were in flight"));
            bls.close();
            Thread r = reader;
            if (r != null && r != Thread.currentThread()) {
                r.join(2000); // the reader drains what the stub wrote last (e.g. finalize's log lines), then sees EOF
            }
            closeQuietly(channel);
            Thread w = writer;
            if (w != null && w != Thread.currentThread()) {
                w.interrupt();
                w.join(5000);
            }
            if (r != null && r != Thread.currentThread()) {
                r.join(5000);
            }
            joinPumps();
            regionLock.writeLock().lock();
            try {
                if (region != null) {
                    region.close();
                }
            } finally {
                regionLock.writeLock().unlock();
            }
            if (droppedMessages.get() > 0) {
                log.info("{}: {} late message(s) from abandoned executions were dropped", describe(), droppedMessages.get());
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (RuntimeException e) {
            log.warn("{}: clean-up after exit failed", describe(), e);
        } finally {
            cleanedUp.complete(null);
        }
        owner.onStubExit(this, reason);
    }

    /**
     * Asks the stub to run finalize() and exit; kills it after {@code finalize_timeout_ms}.
     * Returns once the process is gone and its region is removed.
     */
    void shutdown() {
        if (!dead.get()) {
            if (killReason == null) {
                killReason = "the instance is closing";
            }
            trySend(Wire.F_FINALIZE, new byte[0]);
            Process p = process;
            if (p != null) {
                try {
                    if (!p.waitFor(settings.finalizeTimeoutMillis(), TimeUnit.MILLISECONDS)) {
                        log.warn("{}: finalize() did not end within {} ms; killing the stub", describe(), settings.finalizeTimeoutMillis());
                        p.destroyForcibly();
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    p.destroyForcibly();
                }
            }
        }
        try {
            cleanedUp.get(Duration.ofSeconds(30).toMillis(), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (TimeoutException | java.util.concurrent.ExecutionException e) {
            log.warn("{}: clean-up did not finish", describe(), e);
        }
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
