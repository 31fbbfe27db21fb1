package io.backplane.plugin.openai;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.jspecify.annotations.Nullable;

/** Placeholder until the chat-template branch lands. */
final class ChatTemplate {
    static Optional<ChatTemplate> load(Path dir) {
        return Optional.empty();
    }

    String render(List<Map<String, Object>> messages, boolean addGenerationPrompt, @Nullable List<Map<String, Object>> tools) {
        throw new UnsupportedOperationException();
    }
}
