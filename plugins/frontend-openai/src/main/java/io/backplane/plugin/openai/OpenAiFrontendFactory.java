package io.backplane.plugin.openai;

import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.FrontendContext;
import io.backplane.spi.host.FrontendFactory;

/**
 * The {@code openai} frontend: an OpenAI-compatible API over the host's models. Options (all
 * optional) as {@code OpenAiOptions} lists them: {@code host}, {@code port} (default 9000, 0 picks
 * a free one), {@code api_key}, {@code max_body_bytes}, {@code threads}, {@code drain_timeout_ms},
 * {@code default_max_tokens}, {@code restricted_api}. See docs/openai.md.
 */
public final class OpenAiFrontendFactory implements FrontendFactory {
    public static final String NAME = "openai";

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Frontend create(FrontendContext context) {
        return new OpenAiFrontend(context.service(), OpenAiOptions.parse(context.options()));
    }
}
