/**
 * The batcher SPI: what a plugin implements to replace how the core forms batches out of a
 * model version's queued requests. Backend authors never need this package; the core's own
 * {@code dynamic} and {@code none} batchers implement it, and a model selects one with its
 * {@code batcher} parameter.
 *
 * <p>Discovered through {@link java.util.ServiceLoader}: list a
 * {@link io.backplane.spi.batch.BatcherFactory} in
 * {@code META-INF/services/io.backplane.spi.batch.BatcherFactory}.
 */
@NullMarked
package io.backplane.spi.batch;

import org.jspecify.annotations.NullMarked;
