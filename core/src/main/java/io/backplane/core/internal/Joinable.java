package io.backplane.core.internal;

/**
 * A request handle whose caller is about to block on its result and may lend its thread: the
 * caller runs the request itself when it still waits in its model's queue and an instance is
 * idle, so its answer costs no hand-off to the instance's worker and no wake-up back (issue 16).
 * Only the built-in {@code none} batcher's queue gives requests back ({@link Withdrawable}), and
 * only for models without an execute timeout, response ordering or decoupled responses.
 */
public interface Joinable {
    /**
     * Runs the request on the calling thread if it can be taken back from its queue and an
     * instance of its model is idle; otherwise does nothing. Never blocks for long: it returns
     * at once when the request is already running, ended, or every instance is busy.
     *
     * @return whether the request ran (or ended) here
     */
    boolean help();

    /**
     * The caller will not run the request (it waits with a timeout): a worker takes it now, woken
     * if the request was queued without waking one. Idempotent; nothing when it already runs or ended.
     */
    void handOver();

    /**
     * Whether {@code r}'s caller blocks on it and may run it itself ({@link #help}): a worker that
     * took such a request has no reason to spin for the next one, since that caller's next request
     * will find the instance idle and run on the caller's own thread. A worker that spins takes it
     * first, and the caller then pays the wake-up back that helping avoids.
     */
    static boolean callerHelps(io.backplane.spi.ScheduledRequest r) {
        return r instanceof RequestState s && s.hasHelper();
    }
}
