package io.backplane.spi;

import java.util.List;
import java.util.concurrent.CompletionStage;

/**
 * One execution instance of a model version (a session, a stub process, a GPU stream).
 *
 * <p><b>Threads.</b> {@link #execute} is called by one thread at a time — the instance's core
 * worker, or, when the host runs in caller-runs mode, the thread that submitted the request —
 * never concurrently on one instance. {@link #close} is called once, after the last {@code execute}
 * returned or was abandoned by the unload deadline; it may run on another thread.
 *
 * <p><b>Answering.</b> For every request in the batch the instance answers through that
 * request's {@link ResponseSender}. For a plain model, every sender should be closed (one
 * response with FINAL) by the time {@code execute} returns; the core answers any still open
 * with an INTERNAL error. A decoupled model may keep answering from other threads after
 * {@code execute} returns, until it sends FINAL.
 */
public interface ModelInstance extends AutoCloseable {
    /**
     * Executes a batch. The list is never empty, holds at most {@code max_batch_size} items
     * along the batch dimension (1 request when the model does not batch), and is in dispatch
     * order.
     *
     * @throws Exception any failure: the core sends an error FINAL to every request of the batch
     *     still open, and only to those; the instance keeps serving unless it reported failure
     */
    void execute(List<ScheduledRequest> batch) throws Exception;

    /**
     * Whether the instance can take work now (e.g. its process is up). Probes call it often
     * from any thread; it must be cheap and must not block. Defaults to true.
     */
    default boolean isReady() {
        return true;
    }

    /**
     * Asks the instance whether it is ready, letting the model's own code take part: Triton's
     * {@code TRITONBACKEND_ModelInstanceReady}, through which its python_backend runs the model's
     * {@code is_ready()}. Unlike {@link #isReady()} it may consult a process or the model and
     * answer later.
     *
     * <p>The host calls it for each readiness query that a client or an operator makes (model
     * ready; server ready under strict readiness), from the querying thread, possibly from many
     * threads at once and while {@link #execute} runs. It calls it also when {@link #isReady()}
     * just returned false, so that the instance can say why: the instance is then not ready,
     * whatever the stage answers. It must not block: the answer comes through the returned stage,
     * which must complete with true or false within a bound the backend chooses (the python
     * backend: 5 s, then false). The host takes a stage that completes exceptionally, with null,
     * or not within 30 s as false. A stage that completes exceptionally with a
     * {@link BackplaneException} gives the reason: when no instance of the version is ready, the
     * host logs, once for that query, {@code Model 'm' version v is not ready: <message>}
     * (Triton's line for an error from {@code TRITONBACKEND_ModelInstanceReady}). It is never
     * called after {@link #close}.
     *
     * @return a stage of whether the instance is ready; never null
     * @throws UnsupportedOperationException when the instance has no readiness check of its own
     *     (the default): the host then goes by {@link #isReady()} alone
     * @since SPI 4
     */
    default CompletionStage<Boolean> checkReady() {
        throw new UnsupportedOperationException("this instance has no readiness check of its own; isReady() answers for it");
    }

    /**
     * Releases the instance: stops every thread and process it started. Called once. The default
     * does nothing, for an instance that started none and holds no native memory.
     */
    @Override
    default void close() {
    }
}
