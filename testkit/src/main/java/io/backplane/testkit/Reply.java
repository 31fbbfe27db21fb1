package io.backplane.testkit;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.host.RequestHandle;
import io.backplane.spi.host.ResponseObserver;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import org.jspecify.annotations.Nullable;

/**
 * One request sent through a {@link ModelHarness}, as its client sees it: every response in
 * arrival order and the one terminal outcome (a FINAL, or an error from the backend or the core).
 * Thread-safe; the waits end at a deadline with an {@link AssertionError} that names the request.
 */
public final class Reply {
    private final InferenceRequest request;
    private final Duration timeout;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition changed = lock.newCondition();
    private final List<InferenceResponse> responses = new ArrayList<>();
    private int terminals;
    private int afterTerminal;
    private @Nullable BackplaneException error;
    private volatile @Nullable RequestHandle handle;

    Reply(InferenceRequest request, Duration timeout) {
        this.request = requireNonNull(request, "request is null");
        this.timeout = requireNonNull(timeout, "timeout is null");
    }

    /** The request as it was sent. */
    public InferenceRequest request() {
        return request;
    }

    /** The core's id of the request (0 when the host refused it before accepting it). */
    public long id() {
        RequestHandle h = handle;
        return h == null ? 0 : h.id();
    }

    /** Cancels the request (B6); false when it had already ended. */
    public boolean cancel() {
        RequestHandle h = handle;
        return h != null && h.cancel();
    }

    /** Whether the request has ended. */
    public boolean isDone() {
        lock.lock();
        try {
            return terminals > 0;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Waits for the end of the request and returns its answer: the last response (an empty one
     * when a decoupled model ended with a bare FINAL), or an {@linkplain InferenceResponse#error
     * error response} carrying the error the request ended with.
     *
     * @throws AssertionError when it does not end within the harness's answer timeout, or ended
     *     more than once
     */
    public InferenceResponse await() throws InterruptedException {
        awaitEnd();
        lock.lock();
        try {
            if (terminals != 1 || afterTerminal > 0) {
                throw new AssertionError(describe() + " ended " + terminals + " times and got " + afterTerminal
                        + " response(s) after its end; every request ends exactly once (L1)");
            }
            if (error != null) {
                return InferenceResponse.error(error);
            }
            return responses.isEmpty() ? InferenceResponse.of(List.of()) : responses.getLast();
        } finally {
            lock.unlock();
        }
    }

    /** Waits for the end and returns the one response of a request that must succeed. */
    public InferenceResponse awaitSuccess() throws InterruptedException {
        InferenceResponse r = await();
        BackplaneException e = r.error();
        if (e != null) {
            throw new AssertionError(describe() + " failed: " + e.code() + ": " + e.getMessage(), e);
        }
        return r;
    }

    /** Waits until at least {@code n} responses arrived (or the request ended); a handshake for decoupled models. */
    public List<InferenceResponse> awaitResponses(int n) throws InterruptedException {
        long left = timeout.toNanos();
        lock.lock();
        try {
            while (responses.size() < n && terminals == 0) {
                if (left <= 0) {
                    throw new AssertionError(describe() + " got " + responses.size() + " of " + n + " response(s) within " + timeout.toMillis() + " ms");
                }
                left = changed.awaitNanos(left);
            }
            return List.copyOf(responses);
        } finally {
            lock.unlock();
        }
    }

    /** The responses received so far, in arrival order (errors are not responses: see {@link #error()}). */
    public List<InferenceResponse> responses() {
        lock.lock();
        try {
            return List.copyOf(responses);
        } finally {
            lock.unlock();
        }
    }

    /** The error the request ended with, or null (not ended, or ended with a FINAL). */
    public @Nullable BackplaneException error() {
        lock.lock();
        try {
            return error;
        } finally {
            lock.unlock();
        }
    }

    /** How many terminal outcomes the client saw: 1 for every ended request (L1), 0 before the end. */
    public int terminals() {
        lock.lock();
        try {
            return terminals;
        } finally {
            lock.unlock();
        }
    }

    private void awaitEnd() throws InterruptedException {
        long left = timeout.toNanos();
        lock.lock();
        try {
            while (terminals == 0) {
                if (left <= 0) {
                    throw new AssertionError(describe() + " did not end within " + timeout.toMillis() + " ms (" + responses.size()
                            + " response(s) so far); every request must end with exactly one FINAL or error");
                }
                left = changed.awaitNanos(left);
            }
        } finally {
            lock.unlock();
        }
    }

    String describe() {
        long id = id();
        return "request " + (id > 0 ? "#" + id + " " : "") + "'" + request.id() + "' to model '" + request.modelName() + "'";
    }

    void handle(RequestHandle h) {
        handle = h;
    }

    /** The observer the host calls; one per reply. */
    ResponseObserver observer() {
        return new ResponseObserver() {
            @Override
            public void onResponse(InferenceResponse response) {
                lock.lock();
                try {
                    if (terminals > 0) {
                        afterTerminal++;
                    }
                    responses.add(response);
                    changed.signalAll();
                } finally {
                    lock.unlock();
                }
            }

            @Override
            public void onComplete() {
                end(null);
            }

            @Override
            public void onError(BackplaneException e) {
                end(e);
            }
        };
    }

    private void end(@Nullable BackplaneException e) {
        lock.lock();
        try {
            if (terminals++ == 0) {
                error = e;
            }
            changed.signalAll();
        } finally {
            lock.unlock();
        }
    }

    @Override
    public String toString() {
        lock.lock();
        try {
            return describe() + ": " + (terminals == 0 ? "open" : error != null ? "error " + error.code() + ": " + error.getMessage()
                    : "ended") + ", " + responses.size() + " response(s)";
        } finally {
            lock.unlock();
        }
    }
}
