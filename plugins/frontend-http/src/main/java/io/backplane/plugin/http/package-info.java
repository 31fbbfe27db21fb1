/**
 * The Open Inference Protocol (KServe v2) REST frontend, with Triton's binary tensor,
 * repository and generate extensions, served by Netty. Discovered as the {@code http}
 * {@link io.backplane.spi.host.FrontendFactory}.
 */
@NullMarked
package io.backplane.plugin.http;

import org.jspecify.annotations.NullMarked;
