package io.backplane.backend.python;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BiConsumer;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The host side of a stub's readiness check: Triton's python_backend user-defined {@code is_ready()}
 * ({@code backplane_readiness.py} runs it). {@link #check()} sends a READY frame and completes when
 * the stub answers, or with false after the timeout ({@value #TIMEOUT_MILLIS} ms by default, Triton's
 * fixed 5 s; the {@code readiness_timeout_ms} setting). One check is in
 * flight at a time: a check asked for while one runs shares its answer, including one that
 * outlives its first caller's timeout (Triton reuses the readiness message in flight, and its next
 * query waits for that result). A model without {@code is_ready} answers ABSENT once; from then
 * on this stub is ready without asking it (no IPC, as in Triton). Thread-safe.
 */
final class StubReadiness {
    private static final Logger log = LoggerFactory.getLogger(StubReadiness.class);
    /** Triton's {@code kUserModelReadinessTimeoutMs}. */
    static final long TIMEOUT_MILLIS = 5000;

    private final BiConsumer<Byte, byte[]> send;
    private final String tag;
    private final long timeoutMillis;
    private final Object lock = new Object();
    private long nextAsk = 1;
    private @Nullable CompletableFuture<Boolean> inFlight; // guarded by lock
    private long inFlightAsk; // guarded by lock
    private volatile boolean absent;
    private volatile boolean closed;

    StubReadiness(BiConsumer<Byte, byte[]> send, String tag, long timeoutMillis) {
        this.send = send;
        this.tag = tag;
        this.timeoutMillis = timeoutMillis;
    }

    /** Whether the model's {@code is_ready()} says the stub is ready; never fails; false once closed. */
    CompletableFuture<Boolean> check() {
        if (closed) {
            return CompletableFuture.completedFuture(false);
        }
        if (absent) {
            return CompletableFuture.completedFuture(true);
        }
        CompletableFuture<Boolean> shared;
        long ask = 0;
        synchronized (lock) {
            shared = inFlight;
            if (shared == null) {
                ask = nextAsk++;
                inFlightAsk = ask;
                shared = new CompletableFuture<>();
                inFlight = shared;
            }
        }
        if (ask != 0) {
            byte[] payload = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(ask).array();
            send.accept(Wire.F_READY, payload);
        }
        // Each caller waits at most the timeout; the check itself stays in flight for the next one.
        return shared.copy().completeOnTimeout(false, timeoutMillis, TimeUnit.MILLISECONDS);
    }

    /** The reader thread: a READY_REPLY frame (u64 ask, u8 verdict, u32 length, detail). */
    void onReply(MemorySegment f) {
        long ask = f.get(ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 0);
        int verdict = f.get(ValueLayout.JAVA_BYTE, 8);
        int n = f.get(ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 9);
        String detail = n > 0 ? new String(f.asSlice(13, n).toArray(ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8) : "";
        if (verdict == Wire.READY_ABSENT) {
            absent = true;
        } else if (verdict == Wire.READY_FAILED) {
            log.warn("{}: model readiness check: {}; the instance reports NOT READY", tag, detail);
        }
        CompletableFuture<Boolean> done;
        synchronized (lock) {
            if (ask != inFlightAsk || inFlight == null) {
                return;
            }
            done = inFlight;
            inFlight = null;
        }
        done.complete(verdict == Wire.READY_YES || verdict == Wire.READY_ABSENT);
    }

    /** The stub is gone: a check in flight answers NOT READY, later ones at once. */
    void close() {
        closed = true;
        CompletableFuture<Boolean> done;
        synchronized (lock) {
            done = inFlight;
            inFlight = null;
        }
        if (done != null) {
            done.complete(false);
        }
    }
}
