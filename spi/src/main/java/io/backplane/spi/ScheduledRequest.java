package io.backplane.spi;

import io.backplane.spi.host.RequestHandle;
import io.backplane.spi.host.ResponseObserver;
import java.util.List;
import java.util.function.UnaryOperator;

/**
 * An accepted request as the core schedules it: the client's {@link InferenceRequest} plus the
 * core's bookkeeping. Batchers queue these; backends execute them.
 *
 * <p>Implemented by the core only. Thread-safe.
 */
public interface ScheduledRequest {
    /**
     * The core's id for this request: from a host-wide counter, unique for the host's lifetime,
     * increasing in arrival order. Never derived from thread ids or addresses.
     */
    long id();

    /** What the client sent. */
    InferenceRequest request();

    /** The sender for this request's responses. */
    ResponseSender sender();

    /**
     * Whether the client or the host asked to cancel this request. A backend that sees it may
     * stop work early, but must still end the request (a FINAL, typically an error with
     * {@link ErrorCode#CANCELLED}).
     */
    boolean isCancelled();

    /**
     * Whether the request has ended: the same state as {@code sender().isClosed()}, which is its
     * one name. Kept so that backends compiled against SPI 1 still link.
     *
     * @deprecated use {@code sender().isClosed()}
     */
    @Deprecated(since = "2", forRemoval = true)
    default boolean isDone() {
        return sender().isClosed();
    }

    /**
     * The number of items this request contributes to a batch: its first dimension for a model
     * with {@code max_batch_size > 0}, else 1.
     */
    int batchSize();

    /** Effective priority level, 1 highest (the request's own, or the model default). */
    int priorityLevel();

    /** When the core accepted the request, on the host's monotonic clock ({@link Ticker}). */
    long arrivalNanos();

    /**
     * The request's own queue-timeout override in microseconds, 0 when none; a batcher applies
     * it only when the queue policy allows overrides, and only to shorten the default.
     */
    default long timeoutOverrideMicros() {
        return request().timeoutMicros();
    }

    /**
     * Adds inputs to this queued request before a batcher returns it in a batch: the sequence
     * batcher's control tensors ({@code CONTROL_SEQUENCE_START} …) and implicit state. The backend
     * then sees them in {@link #request()} like the client's inputs. Called by the batcher that
     * holds the request, on the thread that forms the batch, before it returns the batch; not
     * after. Inputs whose names the request already carries replace them. Since SPI 2.
     *
     * @throws UnsupportedOperationException when the host does not support it
     */
    default void addInputs(List<Tensor> inputs) {
        throw new UnsupportedOperationException("this host does not let batchers add inputs");
    }

    /**
     * Installs a hook that sees every response of this request before the client does, and may
     * take tensors out of it: the sequence batcher keeps a model's implicit-state output for the
     * sequence's next request and hides it from the client. At most one hook; called on the
     * backend's sending thread, must not block. Since SPI 2.
     *
     * @throws UnsupportedOperationException when the host does not support it
     */
    default void onResponse(UnaryOperator<InferenceResponse> hook) {
        throw new UnsupportedOperationException("this host does not support response hooks");
    }

    /**
     * Asks the host to execute this request again once the current {@code execute} returns
     * (Triton's {@code TRITONSERVER_REQUEST_RELEASE_RESCHEDULE}, used by iterative sequences): the
     * request stays open, its sender keeps working, and the batcher gets it back through
     * {@link io.backplane.spi.batch.Batcher#rescheduled}. Only for decoupled models; called by the
     * backend during {@code execute}. A request that ends before {@code execute} returns is not
     * queued again. Since SPI 2.
     *
     * @throws IllegalStateException when the model is not decoupled or the request is not executing
     * @throws UnsupportedOperationException when the host does not support it
     */
    default void reschedule() {
        throw new UnsupportedOperationException("this host does not reschedule requests");
    }

    /**
     * Starts a child request of this one (a BLS call: a model calling another model while it
     * executes this request). The child goes through the host like any request, to any model of
     * any backend, and {@code observer} receives its responses and then exactly one terminal call.
     *
     * <p>The child belongs to this request (DESIGN C1): when this request ends by any path (its
     * FINAL, an error, cancellation, unload, instance failure) the host cancels its open
     * children, and {@code observer} gets {@code onError} with {@link ErrorCode#CANCELLED} at
     * once; nothing of the child reaches {@code observer} after this request ended. A child that
     * could only run on an instance held by one of its own callers fails with
     * {@link ErrorCode#UNAVAILABLE} instead of waiting forever (DESIGN C2). A child that cannot
     * be accepted (unknown model, invalid input) gets {@code onError} before this method returns.
     *
     * <p>Callable from any thread while this request is open, typically from
     * {@link ModelInstance#execute} or a thread it started. Calls to {@code observer} are
     * serialized, may come from any thread (also the caller's, before this method returns), and
     * must not block.
     *
     * @return a handle to cancel the child; never null
     * @throws UnsupportedOperationException when the host does not support child requests
     */
    default RequestHandle startChild(InferenceRequest child, ResponseObserver observer) {
        throw new UnsupportedOperationException("this host does not support child requests (BLS)");
    }
}
