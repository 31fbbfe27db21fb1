package io.backplane.backend.python;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.ScheduledRequest;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;

/**
 * One generation of a python stub: the child process, its control socket and its
 * shared-memory region. This class is the coordinator: it starts and ends the process (P1, P5's
 * "a new stub starts" is its owner's), owns the region and its read/write lock (the region closes
 * only under the write lock, once the process is dead: P4), dispatches the reader's frames, and
 * ties together the pieces that each keep one concern:
 *
 * <ul>
 *   <li>{@link StubHandshake}: token, command line, HELLO and INIT's reply (P1);
 *   <li>{@link ControlChannel}: the socket's frames and its one writer thread (P9: no lock across a write);
 *   <li>{@link ExecutionCodec}: the execution messages, results and responses in shared memory (P2, P7);
 *   <li>{@link ExecutionMemory}: the message scratch block and the requests' blocks, their quarantine (P4);
 *   <li>{@link ResponseCredits}: the ACKs of decoupled responses, the credit-based flow control (P9);
 *   <li>{@link HandOff}: posting an execution through the control block, the spin, the futex or socket wake-ups;
 *   <li>{@link ExecutionTable}: matching results and responses to requests, each request ending once (P2, P3);
 *   <li>{@link Liveness}: heartbeat, execute watchdog, stall, recovery or kill (P3, P4);
 *   <li>{@link StubOutput}: the stub's stdout, stderr and log lines into the host's log (P8);
 *   <li>{@link BlsBridge}: BLS calls and custom metrics, through {@link BlsLink}.
 * </ul>
 *
 * None of them depends on this class, and the lower ones (handshake, channel, codec, memory,
 * credits, output) on none of handoff, table, liveness or BLS; {@code StubConnectionArchitectureTest}
 * keeps it so.
 *
 * <p><b>Design.</b> Tensors and execution messages live in the region (host chunks written by
 * the host, stub chunks written by the stub); the Unix socket carries only small frames:
 * start-up handshake, heartbeats, log lines, decoupled responses, acknowledgements and wake-ups.
 * An execution is posted through the control block and its result comes back the same way
 * ({@link HandOff}); a side is woken only when it sleeps, so a busy instance pays no socket round
 * trip and an idle one burns no CPU.
 *
 * <p>Concurrency: {@link #execute} runs on one core worker at a time (SPI contract); the reader
 * thread handles frames; the instance's monitor thread calls {@link #tick} (heartbeat,
 * watchdog, cancellation mirroring, stall recovery); the process-exit callback tears down.
 * However the process ends (finalize and exit, a kill, a crash), its process group is killed too
 * ({@link ProcessGroup}): nothing the model started outlives the stub (R3).
 * Each request ends once from this side through {@link StubRequest#hostDone} (compare-and-set). Its
 * shared memory is freed only when the stub is done with it ({@link StubRequest#stubDone}) and its
 * execution has returned, or when the process is confirmed dead (region closed): memory of an
 * abandoned execution is quarantined, never reused while the stub may still touch it.
 * Every frame and result carries the generation and execution id; one that matches no live
 * request is dropped and acknowledged, never delivered elsewhere. Decoupled responses flow under
 * the stub's response credits ({@link ResponseCredits}, P9).
 */
final class StubConnection {
    private static final Logger log = ControlChannel.log;
    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();

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

    private final Owner owner;
    private final int generation;
    private final StubSettings settings;
    private final String model;
    private final String instance;
    private final String tag;
    private final boolean decoupled;
    private final ReentrantReadWriteLock regionLock = new ReentrantReadWriteLock();
    private final AtomicBoolean dead = new AtomicBoolean();
    private final CompletableFuture<Void> cleanedUp = new CompletableFuture<>();
    private final ControlChannel channel;
    private final StubOutput output;
    private final ExecutionMemory memory = new ExecutionMemory();
    private final ExecutionTable executions;
    private final HandOff handOff;
    private final Liveness liveness;
    private final BlsBridge bls;
    private final StubReadiness readiness;
    private @Nullable SharedRegion region;
    private @Nullable Process process;
    private volatile @Nullable ProcessGroup group;
    /** The backend's socket folder, under which {@link #group} is tracked until the stub ended ({@link ProcessGroup#killAll}). */
    private volatile @Nullable Path groupOwner;
    private @Nullable Thread reader;
    private MemorySegment ctl = MemorySegment.NULL;
    private long nextExecId = 1;
    private long toStubSeq;
    private volatile @Nullable StubExecution current;
    private volatile @Nullable String killReason;

    StubConnection(Owner owner, int generation, StubSettings settings, String model, String instance, boolean decoupled) {
        this.owner = owner;
        this.generation = generation;
        this.settings = settings;
        this.model = model;
        this.instance = instance;
        this.decoupled = decoupled;
        this.tag = "model '" + model + "' instance '" + instance + "'";
        this.channel = new ControlChannel(tag, dead);
        this.output = new StubOutput(model, instance, tag);
        this.executions = new ExecutionTable(generation, decoupled, tag, this::describe, settings, dead, memory,
                new ResponseCredits(channel, tag), this::kill);
        this.liveness = new Liveness(settings, channel, new Watched());
        this.handOff = new HandOff(settings, dead, channel, liveness::stall);
        this.bls = new BlsBridge(new BlsLink(), owner.metrics());
        this.readiness = new StubReadiness(channel::trySend, tag, settings.readinessTimeoutMillis());
    }

    /**
     * The model's own readiness check ({@code is_ready()}, {@link StubReadiness}); false for a dead
     * stub. Never fails, never blocks.
     */
    java.util.concurrent.CompletableFuture<Boolean> checkReady() {
        return dead.get() ? java.util.concurrent.CompletableFuture.completedFuture(false) : readiness.check();
    }

    /** What {@link BlsBridge} sees of this connection. */
    private final class BlsLink implements BlsBridge.Link {
        @Override
        public @Nullable ScheduledRequest openRequest(long execId, int index) {
            StubExecution e = executions.get(execId);
            if (e == null || e.abandoned || index >= e.reqs.size()) {
                return null;
            }
            StubRequest r = e.reqs.get(index);
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
            channel.trySend(type, payload);
        }

        @Override
        public String describe() {
            return StubConnection.this.describe();
        }
    }

    /** What {@link Liveness} sees of this connection (called on the monitor thread, region read-locked, or from execute). */
    private final class Watched implements Liveness.Watched {
        @Override
        public String describe() {
            return StubConnection.this.describe();
        }

        @Override
        public @Nullable StubExecution current() {
            return current;
        }

        @Override
        public void failAll(BackplaneException err) {
            executions.failAll(err);
        }

        @Override
        public void readinessChanged() {
            owner.readinessChanged();
        }

        @Override
        public void kill(String reason) {
            StubConnection.this.kill(reason);
        }

        @Override
        public boolean replied(StubExecution e) {
            return handOff.replied(e);
        }

        @Override
        public void dropResult(StubExecution e) {
            SharedRegion reg = region;
            if (reg != null) {
                synchronized (e) {
                    executions.processResult(reg, ctl, e, false);
                }
            }
        }
    }

    int generation() {
        return generation;
    }

    /** Whether both sides of this connection wake each other through futexes (else through the socket). */
    boolean futexWakeups() {
        return handOff.futexWakeups();
    }

    /** Wake-ups sent to a sleeping stub so far (at most one per time it went to sleep, {@link #stubSleeps}). */
    long stubWakeupsSent() {
        return handOff.stubWakeupsSent();
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
        return liveness.heartbeat();
    }

    /** Whether the PONG of heartbeat {@code seq} arrived (or a later heartbeat superseded it). */
    boolean heartbeatAnswered(long seq) {
        return liveness.heartbeatAnswered(seq);
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
        return liveness.isStalled();
    }

    /**
     * Host-chunk bytes held by executions (inputs, messages), including quarantined ones; the
     * message scratch block counts only while an execution holds it.
     */
    long allocatedBytes() {
        regionLock.readLock().lock();
        try {
            SharedRegion r = region;
            return r == null || dead.get() ? 0 : r.allocatedBytes() - memory.idleScratchBytes();
        } finally {
            regionLock.readLock().unlock();
        }
    }

    long droppedMessages() {
        return executions.droppedMessages();
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
        String token = StubHandshake.newToken();
        Path socketPath = StubHandshake.socketPath(socketDir, generation);
        AtomicBoolean handshakeDone = new AtomicBoolean();
        AtomicBoolean timedOut = new AtomicBoolean();
        CompletableFuture<@Nullable Void> deadline = CompletableFuture.completedFuture(null);
        try {
            region = SharedRegion.create(generation, settings.shmInitialBytes(), settings.shmMaxBytes(), settings.shmGrowthBytes(), socketDir);
            ctl = region.control();
            handOff.attach(ctl);
            ctl.set(ValueLayout.JAVA_LONG, Wire.W_HOST_FUTEX, Futex.available() ? 1L : 0L);
            ctl.set(ValueLayout.JAVA_LONG, Wire.W_STUB_SPIN_NS, settings.spinMicros() * 1000);
            try (ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
                server.bind(UnixDomainSocketAddress.of(socketPath));
                process = StubHandshake.startProcess(settings, stubDir, socketPath, region.prefix(), generation, token, tag);
                Process p = process;
                ProcessGroup g = ProcessGroup.of(p);
                group = g;
                groupOwner = socketDir;
                ProcessGroup.track(socketDir, g);
                output.startPump(p.getInputStream(), false);
                output.startPump(p.getErrorStream(), true);
                Runnable abort = () -> {
                    if (!handshakeDone.get()) {
                        closeQuietly(server);
                        closeQuietly(channel.socket());
                    }
                };
                // An exit closes only the listening socket (a stub that died before connecting): one that connected may have
                // written its INIT_ERR just before exiting, and those frames stay readable until the connection's end of file.
                p.onExit().thenRun(() -> {
                    if (!handshakeDone.get()) {
                        closeQuietly(server);
                    }
                });
                // a deadline that is dropped (with all it holds: the channel, its threads) once the handshake is done
                deadline = new CompletableFuture<@Nullable Void>().completeOnTimeout(null, settings.startupTimeoutMillis(), TimeUnit.MILLISECONDS);
                deadline.thenRun(() -> {
                    if (!handshakeDone.get()) {
                        timedOut.set(true);
                        abort.run();
                    }
                });
                SocketChannel ch = server.accept();
                channel.connected(ch);
                Files.deleteIfExists(socketPath);
                StubHandshake.checkHello(ch, token, generation);
                channel.writeDirect(ControlChannel.frame(Wire.F_INIT, initJson.getBytes(StandardCharsets.UTF_8)));
                // From here on only the writer writes: initialize() may already wait for host replies (custom metrics).
                channel.startWriter("backplane-python-writer-" + model + "-" + instance + "-g" + generation);
                StubHandshake.awaitInit(ch, tag, output, bls::onFrame);
                handshakeDone.set(true);
            }
        } catch (RuntimeException | IOException e) {
            handshakeDone.set(true);
            deadline.cancel(false);
            BackplaneException failure = StubHandshake.startFailure(e, timedOut.get(), process, settings, tag, output);
            killAndCleanUpAfterFailedStart();
            throw failure;
        }
        deadline.cancel(false);
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

    private void killAndCleanUpAfterFailedStart() {
        dead.set(true);
        Process p = process;
        if (p != null) {
            killGroup();
            p.destroyForcibly();
            try {
                p.waitFor(10, TimeUnit.SECONDS);
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
            }
            killGroup();
        }
        closeQuietly(channel.socket());
        Thread w = channel.writer();
        if (w != null) {
            w.interrupt();
            try {
                w.join(5000);
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
            }
        }
        output.joinPumps();
        if (region != null) {
            region.close();
        }
        cleanedUp.complete(null);
    }

    // ------------------------------------------------------------------ socket frames

    private void readLoop() {
        SocketChannel ch = channel.socket();
        ControlChannel.FrameReader frames = new ControlChannel.FrameReader();
        try {
            while (ch != null) {
                ByteBuffer f = frames.next(ch);
                byte type = f.get();
                switch (type) {
                    case Wire.F_PONG -> {
                        if (f.remaining() >= 8) {
                            liveness.onPong(f.getLong());
                        }
                    }
                    case Wire.F_WAKE_HOST -> {
                        StubExecution c = current;
                        Thread w = c == null ? null : c.waiter;
                        if (w != null) {
                            LockSupport.unpark(w);
                        }
                    }
                    case Wire.F_RESPONSE -> onResponseFrame(MemorySegment.ofBuffer(f.slice()));
                    case Wire.F_LOG -> {
                        int level = f.hasRemaining() ? f.get() : 0;
                        output.log(level, StandardCharsets.UTF_8.decode(f).toString());
                    }
                    case Wire.F_FINALIZED -> log.debug("{}: finalize() completed", tag);
                    case Wire.F_BLS, Wire.F_BLS_CANCEL, Wire.F_METRIC, Wire.F_HOST_FREE -> bls.onFrame(type, MemorySegment.ofBuffer(f.slice()));
                    case Wire.F_READY_REPLY -> readiness.onReply(MemorySegment.ofBuffer(f.slice()));
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

    // ------------------------------------------------------------------ executing

    /** Runs one batch; returns when the stub's execute() returned or the stub was given up. */
    void execute(List<ScheduledRequest> batch) {
        StubExecution pending = null;
        StubExecution posted = null;
        regionLock.readLock().lock();
        try {
            SharedRegion reg = region;
            if (dead.get() || liveness.isStalled() || reg == null) {
                BackplaneException err = BackplaneException.unavailable(describe() + " is not serving ("
                        + (liveness.isStalled() ? "stalled" : "exited") + ")");
                for (ScheduledRequest sr : batch) {
                    ExecutionTable.failDirect(sr, err);
                }
                return;
            }
            executions.settleRescheduled(reg);
            StubExecution e = new StubExecution(nextExecId++);
            Wire.Out reqs = new Wire.Out(256);
            for (ScheduledRequest sr : batch) {
                if (sr.sender().isClosed()) {
                    continue;
                }
                StubRequest r = new StubRequest(sr, e.reqs.size(), e);
                try {
                    ExecutionCodec.encodeRequest(reg, r, reqs);
                } catch (RuntimeException ex) {
                    ExecutionMemory.releaseBlocks(reg, r);
                    ExecutionTable.failDirect(sr, BackplaneException.wrap(ex, describe() + ": cannot pass the request to the stub"));
                    continue;
                }
                if (e.reqs.size() == 0xFFFF) {
                    ExecutionTable.failDirect(sr, BackplaneException.invalid("batch holds more than 65535 requests"));
                    ExecutionMemory.releaseBlocks(reg, r);
                    continue;
                }
                e.reqs.add(r);
            }
            if (e.reqs.isEmpty()) {
                return;
            }
            Wire.Out msg = ExecutionCodec.message(generation, e, reqs);
            try {
                memory.placeMessage(reg, e, msg.size());
            } catch (RuntimeException ex) {
                for (StubRequest r : e.reqs) {
                    ExecutionMemory.releaseBlocks(reg, r);
                    ExecutionTable.failDirect(r.sr, BackplaneException.wrap(ex, describe()));
                }
                return;
            }
            SharedRegion.Block mb = e.msgBlock;
            MemorySegment.copy(msg.buffer(), 0, reg.hostSegment(mb), ValueLayout.JAVA_BYTE, 0, msg.size());
            e.seq = ++toStubSeq;
            e.waiter = Thread.currentThread();
            executions.put(e);
            posted = e;
            current = e;
            owner.workStarted();
            boolean got = handOff.post(e, mb, msg.size());
            if (got) {
                synchronized (e) {
                    executions.processResult(reg, ctl, e, !e.abandoned);
                }
            } else {
                executions.awaitFailed(e);
            }
            pending = got && !decoupled ? e : null;
        } finally {
            current = null;
            regionLock.readLock().unlock();
        }
        if (pending != null) {
            executions.awaitSenders(pending);
        }
        if (posted != null && posted.abandoned) {
            // failAll marks an execution abandoned before it ends its requests: a result that arrived
            // just before a stall, or a wait for senders cut short by one, must not return before those
            // requests ended, or the core answers them itself with the wrong error (L6)
            executions.awaitFailed(posted);
        }
    }

    private void onResponseFrame(MemorySegment payload) {
        regionLock.readLock().lock();
        try {
            SharedRegion reg = region;
            if (reg == null || dead.get()) {
                return;
            }
            executions.onResponse(reg, payload);
        } finally {
            regionLock.readLock().unlock();
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
        boolean busy = liveness.isStalled() || current != null || executions.hasOpenRequests();
        if (!busy) {
            liveness.idle();
            return false;
        }
        regionLock.readLock().lock();
        try {
            SharedRegion reg = region;
            if (reg == null || dead.get()) {
                return false;
            }
            ExecutionMemory.mirrorCancels(reg, executions.values());
            liveness.round(now);
            return true;
        } finally {
            regionLock.readLock().unlock();
        }
    }

    /** Whether the monitor has something to watch here: a stall, an execution or an open request. */
    boolean hasWork() {
        return !dead.get() && (liveness.isStalled() || current != null || executions.hasOpenRequests());
    }

    /**
     * Kills the process and its process group (SIGKILL: what the model started ends with it); {@link #onProcessExit} then fails
     * what is open and cleans up.
     */
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
            killGroup();
            p.destroyForcibly();
        }
    }

    private void onProcessExit() {
        // First: what the model started ends with the stub (R3), however the stub ended, and lets go of
        // the stub's output pipes and sockets, which the joins below wait for.
        killGroup();
        ProcessGroup g = group;
        Path tracked = groupOwner;
        if (g != null && tracked != null) {
            ProcessGroup.untrack(tracked, g);
        }
        if (!dead.compareAndSet(false, true)) {
            return;
        }
        Process p = process;
        String reason = killReason != null ? "was killed: " + killReason : ExitStatus.describe(p);
        try {
            executions.failAll(BackplaneException.unavailable(describe() + " " + reason + " while requests were in flight"));
            bls.close();
            readiness.close();
            Thread r = reader;
            if (r != null && r != Thread.currentThread()) {
                r.join(2000); // the reader drains what the stub wrote last (e.g. finalize's log lines), then sees EOF
            }
            closeQuietly(channel.socket());
            Thread w = channel.writer();
            if (w != null && w != Thread.currentThread()) {
                w.interrupt();
                w.join(5000);
            }
            if (r != null && r != Thread.currentThread()) {
                r.join(5000);
            }
            output.joinPumps();
            regionLock.writeLock().lock();
            try {
                if (region != null) {
                    region.close();
                }
            } finally {
                regionLock.writeLock().unlock();
            }
            if (executions.droppedMessages() > 0) {
                log.info("{}: {} late message(s) from abandoned executions were dropped", describe(), executions.droppedMessages());
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
     * Returns once the process is gone, with its process group (what the model started), and its
     * region is removed.
     */
    void shutdown() {
        if (!dead.get()) {
            if (killReason == null) {
                killReason = "the instance is closing";
            }
            channel.trySend(Wire.F_FINALIZE, new byte[0]);
            Process p = process;
            if (p != null) {
                try {
                    if (!p.waitFor(settings.finalizeTimeoutMillis(), TimeUnit.MILLISECONDS)) {
                        log.warn("{}: finalize() did not end within {} ms; killing the stub", describe(), settings.finalizeTimeoutMillis());
                        killGroup();
                        p.destroyForcibly();
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    killGroup();
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

    /** Kills the stub's process group ({@link ProcessGroup}: guarded against a reused pid, idempotent). */
    private void killGroup() {
        ProcessGroup g = group;
        if (g != null) {
            g.kill();
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
}
