/**
 * The host's serving API as plugins see it: {@link io.backplane.spi.host.InferenceService},
 * implemented by the core's embedded host, and the {@link io.backplane.spi.host.FrontendFactory}
 * SPI through which protocol frontends (REST, gRPC) and other host plugins (metrics) are
 * discovered. Plugins compile against this package, never against the core.
 */
@NullMarked
package io.backplane.spi.host;

import org.jspecify.annotations.NullMarked;
