/**
 * The Backplane service-provider interface: what a backend, batcher or plugin author compiles
 * against, and nothing else.
 *
 * <h2>Who calls what</h2>
 * <ul>
 *   <li>The host discovers {@link io.backplane.spi.BackendFactory} and
 *       {@link io.backplane.spi.batch.BatcherFactory} implementations through
 *       {@link java.util.ServiceLoader}, once per plugin class loader.</li>
 *   <li>At discovery the host reads each backend's {@link io.backplane.spi.BackendFactory#capabilities()}
 *       (platforms, model files, placement, batching, decoupled) and its SPI version (from the
 *       factory or the jar's {@code Backplane-SPI-Version} manifest attribute).</li>
 *   <li>For each model version the core calls {@link io.backplane.spi.Backend#loadModel}, then
 *       {@link io.backplane.spi.Model#createInstance} once per configured instance.</li>
 *   <li>Requests reach an instance through {@link io.backplane.spi.ModelInstance#execute}, on a
 *       core worker thread, never concurrently on one instance. Each request is answered through
 *       its own {@link io.backplane.spi.ResponseSender}; sending with
 *       {@link io.backplane.spi.ResponseSender#FINAL} ends the request.</li>
 * </ul>
 *
 * <h2>What the core guarantees</h2>
 * Every accepted request ends exactly once; a closed sender releases the model at once; errors
 * are per request; unload finishes within a deadline even when a backend misbehaves. A backend
 * cannot break these guarantees, only trigger the error paths that keep them.
 *
 * <p>All types in this package are null-marked: parameters and return values are never null
 * unless annotated {@code @Nullable}.
 */
@NullMarked
package io.backplane.spi;

import org.jspecify.annotations.NullMarked;
