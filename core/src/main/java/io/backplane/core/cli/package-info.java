/**
 * The {@code backplane} command line: {@code backplane serve} runs a host with the protocol
 * frontends found through {@link io.backplane.spi.host.FrontendFactory} (Triton-like options),
 * {@code backplane bench} runs the load tool when it is installed. Entry point:
 * {@link io.backplane.core.cli.Main}.
 */
@NullMarked
package io.backplane.core.cli;

import org.jspecify.annotations.NullMarked;
