/**
 * An OpenAI-compatible frontend: {@code GET /v1/models}, {@code POST /v1/completions},
 * {@code POST /v1/chat/completions} (streamed as OpenAI streams, server-sent events ending with
 * {@code data: [DONE]}) and {@code POST /v1/embeddings}, over the host's models. A generative model
 * follows Triton's LLM tensor convention ({@code text_input}, {@code stream},
 * {@code sampling_parameters}, ... in, {@code text_output} out) and is sent only the inputs its
 * config declares, shaped as declared. Discovered as the {@code openai}
 * {@link io.backplane.spi.host.FrontendFactory}.
 */
@NullMarked
package io.backplane.plugin.openai;

import org.jspecify.annotations.NullMarked;
