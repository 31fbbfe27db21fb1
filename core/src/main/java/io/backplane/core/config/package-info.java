/**
 * Triton-compatible model configuration: {@code config.pbtxt} parsed with protobuf text-format
 * semantics over Triton's {@code model_config.proto} (from {@code backplane-protocol}), checked, and converted
 * to the SPI records of {@code io.backplane.spi.config}.
 */
@NullMarked
package io.backplane.core.config;

import org.jspecify.annotations.NullMarked;
