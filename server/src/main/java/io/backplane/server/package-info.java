/**
 * The {@code backplane} command line: {@code backplane serve} runs a host with the protocol
 * frontends found through {@link io.backplane.spi.host.FrontendFactory} (Triton-like options),
 * {@code backplane bench} runs the load tool when it is installed. Entry point:
 * {@link io.backplane.server.Main}.
 */
@NullMarked
package io.backplane.server;

import org.jspecify.annotations.NullMarked;
