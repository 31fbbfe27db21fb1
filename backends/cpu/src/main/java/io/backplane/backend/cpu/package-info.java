/**
 * The cpu backend: runs ONNX models in process with ONNX Runtime. Backend names {@code cpu} and
 * {@code onnxruntime}; Triton platform {@code onnxruntime_onnx}. See {@code docs/backends/cpu.md}.
 */
@NullMarked
package io.backplane.backend.cpu;

import org.jspecify.annotations.NullMarked;
