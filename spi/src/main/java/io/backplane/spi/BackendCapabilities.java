package io.backplane.spi;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.config.InstanceKind;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;

/**
 * What a backend serves and how, declared by {@link BackendFactory#capabilities()} so the core
 * needs no backend names of its own: which Triton {@code platform} values select it, which model
 * file names in a version folder mean "this backend" when a model has no {@code config.pbtxt},
 * where {@code KIND_AUTO} instances should run, and which model features it handles.
 *
 * <p>The core acts on it: a model whose config the backend cannot serve (batching or decoupled
 * where the backend says no) fails its load with an error naming the backend and the field,
 * before the backend sees it; a {@code config.pbtxt} section listed in {@link #configSections()}
 * is accepted for models of this backend and left to it (read it through
 * {@link io.backplane.spi.config.ModelConfig#section(String)}).
 *
 * <p>{@link #DEFAULT} is permissive, so a plugin that declares nothing behaves as before:
 * no platforms, no file names, CPU placement, batching and decoupled allowed (the backend
 * checks them itself), and its models' {@code execute} assumed to have side effects. Immutable and thread-safe; build one with {@link #builder()}.
 */
public final class BackendCapabilities {
    /** What a backend that declares nothing gets; see the class comment. */
    public static final BackendCapabilities DEFAULT = builder().build();

    private final Set<String> platforms;
    private final List<String> modelFileNames;
    private final InstanceKind preferredInstanceKind;
    private final boolean batching;
    private final boolean decoupled;
    private final boolean childRequests;
    private final boolean sideEffectFreeExecute;
    private final @org.jspecify.annotations.Nullable WarmupModel warmupModel;
    private final Set<String> configSections;

    private BackendCapabilities(Builder b) {
        this.platforms = Set.copyOf(b.platforms);
        this.modelFileNames = List.copyOf(b.modelFileNames);
        this.preferredInstanceKind = b.preferredInstanceKind;
        this.batching = b.batching;
        this.decoupled = b.decoupled;
        this.childRequests = b.childRequests;
        this.sideEffectFreeExecute = b.sideEffectFreeExecute;
        this.warmupModel = b.warmupModel;
        this.configSections = Set.copyOf(b.configSections);
    }

    /** A builder starting from {@link #DEFAULT}'s values. */
    public static Builder builder() {
        return new Builder();
    }

    /** Triton {@code platform} values this backend serves (e.g. {@code onnxruntime_onnx}). Never null. */
    public Set<String> platforms() {
        return platforms;
    }

    /**
     * Model file names (e.g. {@code model.py}) that select this backend for a model directory
     * without {@code config.pbtxt}, in order of preference. Never null.
     */
    public List<String> modelFileNames() {
        return modelFileNames;
    }

    /**
     * Where {@code KIND_AUTO} instances (and models without {@code instance_group}) go:
     * {@link InstanceKind#GPU} means "on a GPU when {@link Backend#deviceCount()} is above 0,
     * else on the CPU"; {@link InstanceKind#CPU} (the default) means always CPU.
     */
    public InstanceKind preferredInstanceKind() {
        return preferredInstanceKind;
    }

    /** Whether the backend executes batches ({@code max_batch_size > 0}); true by default. */
    public boolean batching() {
        return batching;
    }

    /** Whether the backend serves decoupled models (any number of responses per request); true by default. */
    public boolean decoupled() {
        return decoupled;
    }

    /**
     * Whether the backend's models may start child requests (BLS, {@code ScheduledRequest.startChild})
     * from {@code execute} and wait for them. True unless the backend declares otherwise. Only for a
     * backend that declares {@code false} may the core run an ensemble step of its models on the
     * worker thread of the step before (no thread hand-off): a step waiting for a child request there
     * could wait for the very worker it borrowed.
     */
    public boolean childRequests() {
        return childRequests;
    }

    /**
     * Whether every model of this backend computes its outputs from its inputs and nothing else:
     * {@code execute} writes nowhere, calls nothing outside the process and keeps no state between
     * requests (an ONNX Runtime session, a compiled graph). Only then may the host send a model a
     * request that no client and no {@code model_warmup} of its own asked for: its built-in warm-up
     * (R1). False by default: a backend that runs user code (a Python {@code model.py}) can promise
     * nothing of the kind, and its models are warmed only when their config asks for it.
     */
    @Experimental
    public boolean sideEffectFreeExecute() {
        return sideEffectFreeExecute;
    }

    /**
     * The model this backend owns to warm its own request path with ({@link WarmupModel}); empty by
     * default (the host then warms nothing of this backend: user models are never sent requests
     * they did not ask for).
     */
    @Experimental
    public java.util.Optional<WarmupModel> warmupModel() {
        return java.util.Optional.ofNullable(warmupModel);
    }

    /**
     * Top-level Triton {@code config.pbtxt} sections the core does not model but this backend
     * reads itself (e.g. {@code optimization}); the core accepts them for this backend's models
     * instead of refusing them. Empty by default.
     */
    @Experimental
    public Set<String> configSections() {
        return configSections;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof BackendCapabilities c && platforms.equals(c.platforms) && modelFileNames.equals(c.modelFileNames)
                && preferredInstanceKind == c.preferredInstanceKind && batching == c.batching && decoupled == c.decoupled && childRequests == c.childRequests
                && sideEffectFreeExecute == c.sideEffectFreeExecute && Objects.equals(warmupModel, c.warmupModel) && configSections.equals(c.configSections);
    }

    @Override
    public int hashCode() {
        return Objects.hash(platforms, modelFileNames, preferredInstanceKind, batching, decoupled, childRequests, sideEffectFreeExecute, configSections);
    }

    @Override
    public String toString() {
        return "BackendCapabilities[platforms=" + platforms + ", modelFileNames=" + modelFileNames + ", preferredInstanceKind="
                + preferredInstanceKind + ", batching=" + batching + ", decoupled=" + decoupled + ", childRequests=" + childRequests + ", sideEffectFreeExecute=" + sideEffectFreeExecute + ", configSections=" + configSections + "]";
    }

    /** Builds {@link BackendCapabilities}; not thread-safe. */
    public static final class Builder {
        private final Set<String> platforms = new LinkedHashSet<>();
        private final List<String> modelFileNames = new ArrayList<>();
        private InstanceKind preferredInstanceKind = InstanceKind.CPU;
        private boolean batching = true;
        private boolean decoupled = true;
        private boolean childRequests = true;
        private boolean sideEffectFreeExecute;
        private @org.jspecify.annotations.Nullable WarmupModel warmupModel;
        private final Set<String> configSections = new LinkedHashSet<>();

        private Builder() {
        }

        /** Adds Triton platform values. */
        public Builder platforms(String... v) {
            for (String p : v) {
                platforms.add(nonEmpty(p, "platform"));
            }
            return this;
        }

        /** Adds model file names, most preferred first; plain names, no folders. */
        public Builder modelFileNames(String... v) {
            for (String f : v) {
                if (nonEmpty(f, "model file name").contains("/") || f.contains("\\")) {
                    throw new IllegalArgumentException("model file name '" + f + "' is not a plain file name; give e.g. model.onnx");
                }
                modelFileNames.add(f);
            }
            return this;
        }

        /**
         * Where KIND_AUTO instances go: {@link InstanceKind#CPU} or {@link InstanceKind#GPU}.
         *
         * @throws IllegalArgumentException for AUTO or MODEL, which are not places
         */
        public Builder preferredInstanceKind(InstanceKind v) {
            if (requireNonNull(v, "preferredInstanceKind is null") != InstanceKind.CPU && v != InstanceKind.GPU) {
                throw new IllegalArgumentException("preferred instance kind " + v + " is not a place; use CPU or GPU");
            }
            preferredInstanceKind = v;
            return this;
        }

        /** Whether the backend executes batches. */
        public Builder batching(boolean v) {
            batching = v;
            return this;
        }

        /** Whether the backend serves decoupled models. */
        public Builder decoupled(boolean v) {
            decoupled = v;
            return this;
        }

        /** Whether the backend's models may start child requests (BLS); see {@link BackendCapabilities#childRequests()}. */
        public Builder childRequests(boolean v) {
            childRequests = v;
            return this;
        }

        /** Whether the backend's models' execute is free of side effects; see {@link BackendCapabilities#sideEffectFreeExecute()}. */
        @Experimental
        public Builder sideEffectFreeExecute(boolean v) {
            sideEffectFreeExecute = v;
            return this;
        }

        /** The model the host warms this backend's own request path with; see {@link BackendCapabilities#warmupModel()}. */
        @Experimental
        public Builder warmupModel(WarmupModel v) {
            warmupModel = requireNonNull(v, "warmupModel is null");
            return this;
        }

        /** Adds top-level config.pbtxt sections the backend reads itself. */
        public Builder configSections(String... v) {
            for (String s : v) {
                configSections.add(nonEmpty(s, "config section"));
            }
            return this;
        }

        public BackendCapabilities build() {
            return new BackendCapabilities(this);
        }

        private static String nonEmpty(String v, String what) {
            if (requireNonNull(v, what + " is null").isBlank()) {
                throw new IllegalArgumentException(what + " is empty");
            }
            return v;
        }
    }
}
