/**
 * The Open Inference Protocol (KServe v2 / Triton) gRPC frontend: {@code inference.GRPCInferenceService}
 * on grpc-java. Discovered as the {@code grpc} {@link io.backplane.spi.host.FrontendFactory}.
 */
@NullMarked
package io.backplane.plugin.grpc;

import org.jspecify.annotations.NullMarked;
