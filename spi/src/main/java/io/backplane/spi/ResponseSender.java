package io.backplane.spi;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import org.jspecify.annotations.Nullable;

/**
 * Sends the responses of exactly one request. Created by the core, one per request; reached
 * through {@link ScheduledRequest#sender()}.
 *
 * <p><b>State.</b> A sender is OPEN until a send with {@link #FINAL}, then CLOSED for good.
 * Closing releases the request's hold on its model version at once, whatever still references
 * the sender object (so unload never waits for garbage collection). A send after CLOSED throws
 * {@link IllegalStateException} naming the request, and nothing reaches the client.
 *
 * <p><b>Plain (non-decoupled) models</b> send exactly one response, with {@code FINAL}. A send
 * without {@code FINAL}, or a {@code FINAL} without a response, throws
 * {@link IllegalStateException} and sends nothing; if {@code execute} then returns with the
 * sender still open, the core answers the request with an INTERNAL error.
 *
 * <p><b>Decoupled models</b> send any number of responses, from any thread, during or after
 * {@code execute}, then one {@code FINAL} (with or without a last response).
 *
 * <p>Thread-safe: any thread may call any method; concurrent sends are serialized, and of two
 * racing {@code FINAL}s exactly one wins.
 */
public interface ResponseSender {
    /** The flag that closes the sender and ends the request. */
    int FINAL = 1;

    /**
     * Sends {@code response} (may be null only with {@link #FINAL}: "no more responses").
     *
     * @param flags 0 or {@link #FINAL}
     * @throws IllegalStateException when the sender is closed, or the send breaks the rules of a
     *     plain model (see the class comment); the message names the request
     */
    void send(@Nullable InferenceResponse response, int flags);

    /** Sends {@code response} with {@link #FINAL}. */
    default void sendFinal(InferenceResponse response) {
        send(response, FINAL);
    }

    /** Ends the request with {@code error}. */
    default void sendError(BackplaneException error) {
        send(InferenceResponse.error(error), FINAL);
    }

    /** Whether a FINAL has been sent or the core has ended the request (error, cancel, timeout). */
    boolean isClosed();

    /**
     * Flow control for decoupled models (DESIGN P9): a stage that completes when the consumer of
     * this request's responses (a client stream, a parent request) can take more. A backend that
     * produces faster than its client reads waits for it before it lets the model send on (the
     * python backend holds back the model's response credit), so a slow client slows the model
     * instead of making a frontend buffer without bound.
     *
     * <p>Advisory: {@link #send} never waits and never refuses a response because the consumer is
     * not ready. The stage is never null and always completes, never exceptionally: at once when
     * the consumer is ready or the sender is closed, otherwise when the consumer becomes ready or
     * the sender closes (FINAL, error, cancellation, timeout, unload), whichever comes first, so
     * nothing waits on it forever. Dependent actions may run on any thread, including the one that
     * closes the sender or a frontend's event loop: they must not block. Each call returns a stage
     * of its own; call it after a send, not before every send.
     *
     * <p>The default (for senders made outside the core, such as test fakes) is always ready.
     *
     * @return a stage completing when the consumer can take more responses or the sender is closed
     */
    @Experimental
    default CompletionStage<Void> ready() {
        return CompletableFuture.completedStage(null);
    }
}
