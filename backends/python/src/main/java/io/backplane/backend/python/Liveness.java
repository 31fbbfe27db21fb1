package io.backplane.backend.python;

import io.backplane.spi.BackplaneException;
import org.jspecify.annotations.Nullable;

/**
 * The liveness watch of one stub generation: the heartbeat (PING/PONG), the execute watchdog, the
 * stall, and the way back from it or the kill.
 *
 * <p>Owns <b>P3</b>: a stub that answers no heartbeat within {@code heartbeat_timeout_ms}, or
 * whose execute() outlives {@code execute_timeout_ms}, is declared stalled: its open requests fail
 * at once, each exactly once (through {@link Watched#failAll}), with an error naming the instance.
 * And the deadline half of <b>P4</b>: a stalled stub that answers again and ends its abandoned
 * execution serves again; one that does not within {@code stall_kill_ms} is killed, so it never
 * blocks its instance forever. It reaches the connection only through {@link Watched}.
 */
final class Liveness {
    /** What the watch needs from its connection. */
    interface Watched {
        String describe();

        /** The execution being waited for now, or null. */
        @Nullable StubExecution current();

        /** Abandons every execution and fails each of its open requests with {@code err}. */
        void failAll(BackplaneException err);

        void readinessChanged();

        void kill(String reason);

        /** Whether the stub posted the result of {@code e}. */
        boolean replied(StubExecution e);

        /** Reads the posted result of the abandoned {@code e} and drops it (frees what it held). */
        void dropResult(StubExecution e);
    }

    private final StubSettings settings;
    private final ControlChannel channel;
    private final Watched stub;
    private volatile boolean stalled;
    private volatile long stalledSinceNanos;
    private volatile long pingSentNanos;
    private volatile @Nullable StubExecution abandonedCurrent;
    private long lastPingNanos;
    private long pingSeq;

    Liveness(StubSettings settings, ControlChannel channel, Watched stub) {
        this.settings = settings;
        this.channel = channel;
        this.stub = stub;
    }

    boolean isStalled() {
        return stalled;
    }

    /** Sends a heartbeat now and returns its sequence number; {@link #heartbeatAnswered} tells when the PONG came. */
    long heartbeat() {
        long seq;
        synchronized (this) {
            seq = ++pingSeq;
        }
        pingSentNanos = System.nanoTime();
        channel.trySend(Wire.F_PING, new Wire.Out(8).u64(seq).toByteArray());
        return seq;
    }

    /** Whether the PONG of heartbeat {@code seq} arrived (or a later heartbeat superseded it). */
    boolean heartbeatAnswered(long seq) {
        return pingSentNanos == 0 || pingSeqSent() != seq;
    }

    /** A PONG arrived (reader thread). */
    void onPong(long seq) {
        if (seq == pingSeqSent()) {
            pingSentNanos = 0;
        }
    }

    /** The stub has no work: nothing to watch, no heartbeat outstanding (monitor thread). */
    void idle() {
        pingSentNanos = 0;
    }

    private synchronized long pingSeqSent() {
        return pingSeq;
    }

    /**
     * One round of the watch while the stub has work (monitor thread, region read-locked): the
     * heartbeat, the execute watchdog, and the recovery or the kill of a stalled stub.
     */
    void round(long now) {
        long sent = pingSentNanos;
        if (sent == 0) {
            if (now - lastPingNanos >= settings.heartbeatIntervalMillis() * 1_000_000) {
                long seq;
                synchronized (this) {
                    seq = ++pingSeq;
                }
                lastPingNanos = now;
                pingSentNanos = now;
                channel.trySend(Wire.F_PING, new Wire.Out(8).u64(seq).toByteArray());
            }
        } else if (!stalled && now - sent > settings.heartbeatTimeoutMillis() * 1_000_000) {
            stall("sent no heartbeat for " + (now - sent) / 1_000_000 + " ms (" + StubSettings.HEARTBEAT_TIMEOUT + "="
                    + settings.heartbeatTimeoutMillis() + "); it is stopped or hung");
        }
        StubExecution c = stub.current();
        long limit = settings.executeTimeoutMillis();
        if (!stalled && c != null && limit > 0 && now - c.startNanos > limit * 1_000_000) {
            stall("execute() ran longer than " + StubSettings.EXECUTE_TIMEOUT + "=" + limit + " ms");
        }
        if (stalled) {
            StubExecution a = abandonedCurrent;
            if (a != null && !a.resultSeen && stub.replied(a)) {
                stub.dropResult(a);
                ControlChannel.log.info("{}: the abandoned execution {} ended late; its results were dropped", stub.describe(), a.id);
            }
            if ((a == null || a.resultSeen) && pingSentNanos == 0 && stub.current() == null) {
                abandonedCurrent = null;
                stalled = false;
                ControlChannel.log.warn("{}: the python stub responds again; the instance serves again", stub.describe());
                stub.readinessChanged();
            } else if (now - stalledSinceNanos > settings.stallKillMillis() * 1_000_000) {
                stub.kill("did not recover within " + StubSettings.STALL_KILL + "=" + settings.stallKillMillis() + " ms of being"
                        + " declared unhealthy");
            }
        }
    }

    /** Fails everything open on this stub and quarantines its in-flight memory (P3, P4); once until it recovers. */
    synchronized void stall(String reason) {
        if (stalled) {
            return;
        }
        stalledSinceNanos = System.nanoTime();
        stalled = true;
        StubExecution c = stub.current();
        abandonedCurrent = c;
        String message = stub.describe() + " " + reason;
        ControlChannel.log.warn("{}: failing its open requests; it is killed unless it recovers within {} ms", message, settings.stallKillMillis());
        stub.failAll(BackplaneException.unavailable(message));
        stub.readinessChanged();
    }
}
