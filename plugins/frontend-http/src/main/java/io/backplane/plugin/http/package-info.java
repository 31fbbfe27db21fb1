/**
 * The Open Inference Protocol (KServe v2) REST frontend, with Triton's binary tensor,
 * repository and generate extensions, served by Netty. Discovered as the {@code http}
 * {@link io.backplane.spi.host.FrontendFactory}.
 *
 * <p>A request passes the pipeline {@code HttpFrontend} builds (connection guard, TLS, decoder,
 * framing guard, body admission, aggregator, pipeline order) and reaches {@code RestRouter}, which
 * hands it to one {@code RestRoute} per extension ({@code InferenceHandler},
 * {@code GenerateHandler}, {@code RepositoryHandler}, ...). Handlers share only helpers
 * ({@code Reply}, {@code Responses}, {@code RestErrors}, {@code Json}, the codecs), never each other.
 */
@NullMarked
package io.backplane.plugin.http;

import org.jspecify.annotations.NullMarked;
