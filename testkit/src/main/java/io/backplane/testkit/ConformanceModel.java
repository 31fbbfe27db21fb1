package io.backplane.testkit;

import static java.util.Objects.requireNonNull;

import io.backplane.core.config.ModelConfigParser;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.config.ModelConfig;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.LongFunction;
import org.jspecify.annotations.Nullable;

/**
 * The model a backend loads under test: its config, the files of its version folder, how to make
 * a valid request and how to check the response. Immutable; build with {@link #builder}.
 *
 * <p>The kit defines the model in code ({@code BackplaneHost.Builder.model}) and writes the
 * version files into the folder the core hands the backend ({@code ModelContext.versionDirectory()})
 * before {@code autoCompleteConfig} and {@code loadModel} run.
 */
public final class ConformanceModel {
    private final ModelConfig config;
    private final Map<String, byte[]> versionFiles;
    private final Map<String, byte[]> modelFiles;
    private final LongFunction<InferenceRequest> request;
    private final ResponseCheck check;
    private final @Nullable LongFunction<InferenceRequest> failingRequest;

    private ConformanceModel(Builder b) {
        this.config = b.config;
        this.versionFiles = Map.copyOf(b.versionFiles);
        this.modelFiles = Map.copyOf(b.modelFiles);
        this.request = requireNonNull(b.request, "request(...) was not set: the kit needs a way to make a valid request");
        this.check = requireNonNull(b.check, "check(...) was not set: the kit needs a way to check a response");
        this.failingRequest = b.failingRequest;
    }

    /** Stands in before {@code model()} was called; never used to run a check. */
    static ConformanceModel placeholder() {
        return builder(ModelConfig.builder("none").build()).request(t -> InferenceRequest.builder("none").build()).check((r, rs) -> { }).build();
    }

    public static Builder builder(ModelConfig config) {
        return new Builder(config);
    }

    /**
     * A model of a Triton-layout repository: its {@code config.pbtxt} (parsed and checked as the
     * host does), the files of its highest version folder, and the other files of its model
     * folder. Add {@link Builder#request} and {@link Builder#check} before building.
     *
     * @throws io.backplane.spi.BackplaneException when the folder or its config is not valid
     */
    public static Builder fromRepository(Path repository, String model) {
        Path dir = repository.resolve(model);
        Builder b = new Builder(ModelConfigParser.parseModelDirectory(dir));
        ModelFiles files = ModelFiles.ofFolder(dir);
        b.versionFiles.putAll(files.versionFiles());
        b.modelFiles.putAll(files.modelFiles());
        return b;
    }

    public ModelConfig config() {
        return config;
    }

    /** Relative path → content, written into every version folder. */
    public Map<String, byte[]> versionFiles() {
        return versionFiles;
    }

    /** Relative path → content, written into the model folder (beside the version folders). */
    public Map<String, byte[]> modelFiles() {
        return modelFiles;
    }

    ModelFiles files() {
        return new ModelFiles(modelFiles, versionFiles);
    }

    /** A valid request carrying a payload unique to {@code tag} (the kit sets its id). */
    public InferenceRequest request(long tag) {
        return requireNonNull(request.apply(tag), "request(" + tag + ") returned null");
    }

    public ResponseCheck check() {
        return check;
    }

    /** A request the backend must answer with an error (for L5), or null when none was given. */
    public @Nullable LongFunction<InferenceRequest> failingRequest() {
        return failingRequest;
    }

    /** Builds a {@link ConformanceModel}; not thread-safe. */
    public static final class Builder {
        private ModelConfig config;
        private final Map<String, byte[]> versionFiles = new LinkedHashMap<>();
        private final Map<String, byte[]> modelFiles = new LinkedHashMap<>();
        private @Nullable LongFunction<InferenceRequest> request;
        private @Nullable ResponseCheck check;
        private @Nullable LongFunction<InferenceRequest> failingRequest;

        private Builder(ModelConfig config) {
            this.config = requireNonNull(config, "config is null");
        }

        /** Replaces the config, e.g. {@code c -> c.toBuilder().dynamicBatching(null).build()} after {@link #fromRepository}. */
        public Builder mapConfig(java.util.function.UnaryOperator<ModelConfig> change) {
            this.config = requireNonNull(change.apply(config), "mapConfig returned null");
            return this;
        }

        /** A file of the version folder, e.g. {@code model.py} or {@code model.onnx}. */
        public Builder versionFile(String relativePath, byte[] content) {
            versionFiles.put(ModelFiles.checked(relativePath), content.clone());
            return this;
        }

        public Builder versionFile(String relativePath, String utf8) {
            return versionFile(relativePath, utf8.getBytes(StandardCharsets.UTF_8));
        }

        /** Every file under {@code dir} (recursively) as a version-folder file. */
        public Builder versionFilesFrom(Path dir) {
            versionFiles.putAll(ModelFiles.readTree(dir));
            return this;
        }

        /** A file of the model folder, beside the version folders. */
        public Builder modelFile(String relativePath, byte[] content) {
            modelFiles.put(ModelFiles.checked(relativePath), content.clone());
            return this;
        }

        /**
         * How to make a valid request for tag {@code n}: payloads must differ between tags so
         * that {@link #check} can tell whose response it sees. The model name must be the
         * config's; the kit overwrites the request id.
         */
        public Builder request(LongFunction<InferenceRequest> maker) {
            this.request = requireNonNull(maker, "maker is null");
            return this;
        }

        public Builder check(ResponseCheck check) {
            this.check = requireNonNull(check, "check is null");
            return this;
        }

        /**
         * A request that passes the core's validation but that the backend answers with an error
         * (e.g. a parameter the model refuses). Without one, the L5 check is reported as aborted
         * with the reason.
         */
        public Builder failingRequest(LongFunction<InferenceRequest> maker) {
            this.failingRequest = requireNonNull(maker, "maker is null");
            return this;
        }

        public ConformanceModel build() {
            return new ConformanceModel(this);
        }
    }
}
