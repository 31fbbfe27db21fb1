/**
 * Model configuration as immutable values (final classes with builders, no public constructors): what a {@code config.pbtxt} says, after the host
 * parsed and checked it. Field names follow Triton's {@code model_config.proto}.
 */
@NullMarked
package io.backplane.spi.config;

import org.jspecify.annotations.NullMarked;
