/**
 * Triton-compatible model configuration: {@code config.pbtxt} parsed with protobuf text-format
 * semantics over Backplane's subset of Triton's {@code model_config.proto}, checked, and converted
 * to the SPI records of {@code io.backplane.spi.config}.
 */
@NullMarked
package io.backplane.core.config;

import org.jspecify.annotations.NullMarked;
