package io.backplane.plugin.openai;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.host.InferenceService;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Each model's chat template and tokenizer, read once per loaded config from the model's
 * tokenizer folder: the folder the model's parameter {@code tokenizer} names (absolute, or relative
 * to the model's folder; {@code $$TRITON_MODEL_DIRECTORY} stands for the model's folder), else the
 * model's folder itself. A reload (a new config) reads them again and closes the tokenizer it
 * replaces (a request still counting with it then answers without usage).
 */
final class ModelFiles implements AutoCloseable {
    private static final Logger log = LoggerFactory.getLogger(ModelFiles.class);
    static final String TOKENIZER_PARAMETER = "tokenizer";

    /**
     * What a model has.
     *
     * @param template its chat template, or null
     * @param counter its tokenizer, or null
     * @param where the folder they were looked for in, for messages
     * @param error why the chat template could not be read, or null
     */
    record Files(@Nullable ChatTemplate template, @Nullable TokenCounter counter, String where, @Nullable BackplaneException error) {
        /** The chat template; throws why it could not be read, when it could not. */
        @Override
        public @Nullable ChatTemplate template() {
            if (error != null) {
                throw error;
            }
            return template;
        }
    }

    private record Entry(ModelConfig config, Files files) {
    }

    private final InferenceService service;
    private final Map<String, Entry> byModel = new ConcurrentHashMap<>();
    private final List<TokenCounter> all = new ArrayList<>();
    private boolean closed;

    ModelFiles(InferenceService service) {
        this.service = requireNonNull(service, "service is null");
    }

    /** The files of {@code model} as loaded with {@code config}. */
    Files of(String model, ModelConfig config) {
        Entry e = byModel.get(model);
        if (e != null && e.config().equals(config)) {
            return e.files();
        }
        List<Entry> replaced = new ArrayList<>(1);
        Entry fresh = byModel.compute(model, (m, old) -> {
            if (old != null && old.config().equals(config)) {
                return old;
            }
            if (old != null) {
                replaced.add(old);
            }
            return new Entry(config, read(m, config));
        });
        for (Entry old : replaced) {
            // a reload: the old tokenizer goes now (a count still running on it finishes first; a later one fails and that
            // answer goes without usage), not with the frontend
            TokenCounter c = old.files().counter();
            if (c != null) {
                synchronized (all) {
                    all.remove(c);
                }
                c.close();
            }
        }
        return fresh.files();
    }

    private Files read(String model, ModelConfig config) {
        Optional<Path> dir = folder(model, config);
        if (dir.isEmpty()) {
            return new Files(null, null, "(model '" + model + "' has no folder)", null);
        }
        Path d = dir.get();
        ChatTemplate template = null;
        BackplaneException error = null;
        try {
            template = ChatTemplate.load(d).orElse(null);
        } catch (RuntimeException e) {
            error = BackplaneException.invalid("model '" + model + "': its chat template in " + d + " could not be read: " + e.getMessage()
                    + "; fix the template (Jinja) or leave it out");
            log.warn("openai frontend: {}", error.getMessage());
        }
        TokenCounter counter = null;
        try {
            counter = TokenCounter.load(d).orElse(null);
        } catch (RuntimeException | LinkageError e) {
            log.warn("openai frontend: model '{}': its tokenizer in {} could not be loaded ({}); usage is reported only where the model counts tokens",
                    model, d, e.toString());
        }
        if (counter != null) {
            synchronized (all) {
                if (closed) {
                    counter.close();
                    counter = null;
                } else {
                    all.add(counter);
                }
            }
        }
        log.info("openai frontend: model '{}': chat template {}, tokenizer {} (from {})", model, template != null ? "found" : "none",
                counter != null ? "found" : "none", d);
        return new Files(template, counter, d.toString(), error);
    }

    private Optional<Path> folder(String model, ModelConfig config) {
        Optional<Path> modelDir;
        try {
            modelDir = service.modelDirectory(model, InferenceRequest.LATEST);
        } catch (BackplaneException e) {
            modelDir = Optional.empty();
        }
        String p = config.parameters().get(TOKENIZER_PARAMETER);
        if (p == null || p.isBlank()) {
            return modelDir;
        }
        if (p.contains("$$TRITON_MODEL_DIRECTORY")) {
            if (modelDir.isEmpty()) {
                return Optional.empty();
            }
            p = p.replace("$$TRITON_MODEL_DIRECTORY", modelDir.get().toString());
        }
        Path t = Path.of(p);
        if (!t.isAbsolute()) {
            if (modelDir.isEmpty()) {
                return Optional.empty();
            }
            t = modelDir.get().resolve(t);
        }
        return Optional.of(t.normalize());
    }

    @Override
    public void close() {
        List<TokenCounter> close;
        synchronized (all) {
            closed = true;
            close = List.copyOf(all);
            all.clear();
        }
        byModel.clear();
        for (TokenCounter c : close) {
            c.close();
        }
    }
}
