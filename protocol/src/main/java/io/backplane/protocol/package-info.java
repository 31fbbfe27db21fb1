/**
 * What the REST and gRPC frontends of the Open Inference Protocol share, written once: model
 * version strings ({@link io.backplane.protocol.ModelVersions}), the classification of a failure
 * into a {@link io.backplane.spi.BackplaneException} whose {@link io.backplane.spi.ErrorCode}
 * names the HTTP and gRPC status ({@link io.backplane.protocol.ProtocolErrors}), and building a
 * tensor from element values as a protocol carries them ({@link io.backplane.protocol.TensorFill}).
 * The generated Triton messages and gRPC stubs are in {@code io.backplane.protocol.inference}.
 *
 * <p>These types are used by frontends and the core; none of them appears in the SPI, so a plugin
 * that uses them carries its own copy of this module in its plugin directory.
 */
@NullMarked
package io.backplane.protocol;

import org.jspecify.annotations.NullMarked;
