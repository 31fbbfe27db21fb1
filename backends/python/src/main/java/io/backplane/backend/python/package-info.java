/**
 * The Python-stub backend: runs Triton python_backend models ({@code model.py} with
 * {@code TritonPythonModel}) in one supervised child Python process per instance, exchanging
 * tensors through a shared-memory region. See {@code docs/backends/python.md}.
 */
@NullMarked
package io.backplane.backend.python;

import org.jspecify.annotations.NullMarked;
