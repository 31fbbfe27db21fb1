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
}
