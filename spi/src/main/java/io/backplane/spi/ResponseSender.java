package io.backplane.spi;

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
}
