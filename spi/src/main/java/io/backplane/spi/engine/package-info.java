/**
 * Helpers for backends that wrap an in-process engine (ONNX Runtime, libtorch, XGBoost, ...): what
 * every such backend would otherwise write for itself.
 *
 * <ul>
 *   <li>{@link io.backplane.spi.engine.BatchLayout} checks each request of a batch against the
 *       model's config and groups requests of equal shapes; {@link io.backplane.spi.engine.RowBatch}
 *       stacks a group's rows into one engine call (no copy for a single request) and splits the
 *       engine's outputs back per request (slices, no copy); {@link io.backplane.spi.engine.BatchLayout#execute}
 *       keeps errors per request when the engine fails a whole batch.</li>
 *   <li>{@link io.backplane.spi.engine.NativeGuard} frees native engine state exactly once, and never
 *       under an {@code execute} that is still inside native code when {@code close} is called.</li>
 * </ul>
 *
 * <p>The pattern, in an instance:
 *
 * <pre>{@code
 * private final BatchLayout layout = BatchLayout.of(config);
 * private final NativeGuard guard = new NativeGuard("model 'm' instance 0", engineSession::close);
 *
 * public void execute(List<ScheduledRequest> batch) {
 *     try (NativeGuard.Entry _ = guard.enter()) {
 *         layout.execute(batch, this::run);
 *     }
 * }
 *
 * private Map<String, Tensor> run(RowBatch b) throws Exception {
 *     try (Arena arena = Arena.ofConfined()) {
 *         MemorySegment x = b.stack("INPUT__0", arena);          // every request's rows, in order
 *         float[] y = engine.predict(x, b.shape("INPUT__0"));    // one call for the group
 *         return Map.of("OUTPUT__0", Tensor.ofFloats("OUTPUT__0", new long[] {b.rows(), 1}, y));
 *     }
 * }
 *
 * public void close() { guard.close(); }
 * }</pre>
 *
 * <p>Tensor bytes are little-endian, the byte order of every tensor in Backplane (see
 * {@link io.backplane.spi.Tensor}), the native order of the platforms Backplane runs on.
 * {@link io.backplane.spi.engine.RowBatch#stack} always returns native memory aligned to the element
 * size, so its address can be handed to an engine; a request's own tensor may be heap memory (a
 * REST body, {@code Tensor.ofFloats}), whose {@code address()} is no pointer.
 */
@NullMarked
package io.backplane.spi.engine;

import org.jspecify.annotations.NullMarked;
