/**
 * Model configuration as immutable records: what a {@code config.pbtxt} says, after the host
 * parsed and checked it. Field names follow Triton's {@code model_config.proto}.
 */
@NullMarked
package io.backplane.spi.config;

import org.jspecify.annotations.NullMarked;
