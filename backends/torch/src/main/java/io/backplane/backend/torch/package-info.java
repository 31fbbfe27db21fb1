/**
 * The TorchScript backend ({@code backend: "pytorch"}, Triton's {@code platform: "pytorch_libtorch"}):
 * libtorch on the CPU through DJL's PyTorch engine, written only against {@code backplane-spi} as a
 * third party writes a backend. See {@code docs/backends/pytorch.md}.
 */
@NullMarked
package io.backplane.backend.torch;

import org.jspecify.annotations.NullMarked;
