package io.backplane.core.internal;

import io.backplane.core.repository.FileRoot;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ConfigNode;
import io.backplane.spi.config.ModelConfig;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BiFunction;
import java.util.function.LongSupplier;
import org.jspecify.annotations.Nullable;

/**
 * Triton's {@code model_warmup}: each sample becomes a request (zero, random or file data, of the
 * sample's type and shape, with {@code batch_size} along the batch dimension) sent {@code count}
 * times (at least once) through the version's own admission, batcher and instances before the
 * version is published, so the model reports ready only after its warm-up ran. The first failing
 * sample fails the load, named.
 *
 * <p>No user model receives a request that neither a client nor its own config asked for (<b>R1</b>):
 * a model without {@code model_warmup} gets the <em>built-in</em> warm-up only when its config
 * asks for it (the model parameter {@value #PARAMETER}: {@code true} or a count), or when its backend
 * declares its execute free of side effects
 * ({@link io.backplane.spi.BackendCapabilities#sideEffectFreeExecute()}: ONNX Runtime does, a Python
 * {@code model.py} cannot) and the host's {@code builtinWarmup} option is on
 * ({@code backplane serve --builtin-warmup}); {@value #PARAMETER} {@code false} turns it off for one
 * model. The built-in warm-up is one sample named {@value #BUILTIN} of zeros shaped
 * from the config's inputs (a {@code -1} dimension and the batch dimension become 1, BYTES elements
 * are empty strings, optional inputs are left out), sent {@value #BUILTIN_COUNT} times. Where no
 * request can be made from the config (a sequence batcher's control inputs, a shape tensor) it is
 * skipped with a debug line. Its failure is logged and does not fail the load: the data is made
 * up, and a model may rightly refuse zeros; a {@code model_warmup} of the model's own fails it.
 * It is bounded: readiness waits at most {@link #BUILTIN_BUDGET} for it, first request included; the
 * request still running then is cancelled (the model sees {@code is_cancelled()}) and the model
 * loads without the rest.
 *
 * <p>Warm-up requests ({@link Sink}, and the child requests they start) are invisible to the host's
 * listeners, so they reach neither statistics nor metrics, and never the response cache
 * ({@link RequestState#warmUp()}).
 */
final class Warmup {
    /** How long one warm-up request may take before the load fails. */
    static final Duration TIMEOUT = Duration.ofMinutes(2);
    /** The model parameter that turns the built-in warm-up on or off for one model ({@code "true"}/{@code "false"}), or sets its count. */
    static final String PARAMETER = "builtin_warmup";
    /** The built-in sample's name. */
    static final String BUILTIN = "builtin";
    /** How many times the built-in sample runs: the first request pays for lazy set-up (classes, native sessions, the stub's first call), the rest go the steady path once. */
    static final int BUILTIN_COUNT = 4;
    private static final int MAX_BUILTIN_COUNT = 10_000;
    /**
     * How long the built-in sample may delay ready, all its requests together: a request still
     * running when it passes is cancelled, and no further one is sent. A model that takes seconds a
     * request (a large one, or a decoupled one that keeps its sender) delays its ready by this, not
     * by {@value #BUILTIN_COUNT} requests. A model's own {@code model_warmup} always runs in full.
     */
    static final Duration BUILTIN_BUDGET = Duration.ofSeconds(2);
    private static final org.slf4j.Logger log = org.slf4j.LoggerFactory.getLogger(Warmup.class);

    /**
     * The requests of one sample.
     *
     * @param builtIn whether it is the built-in sample (its failure is logged, not thrown)
     */
    record Sample(String name, InferenceRequest request, int count, boolean builtIn) {
        Sample(String name, InferenceRequest request, int count) {
            this(name, request, count, false);
        }
    }

    /**
     * The warm-up of a version: its {@code model_warmup} samples, or else the built-in sample when
     * this model asks for it (the parameter {@value #PARAMETER}), or when its backend's execute is
     * free of side effects ({@code sideEffectFree}) and {@code hostDefault} is on.
     *
     * @throws BackplaneException INVALID_ARGUMENT naming the sample and input when data cannot be
     *     made, or a bad {@value #PARAMETER} value
     */
    static List<Sample> of(ModelConfig config, Path modelDirectory, FileRoot files, boolean hostDefault, boolean sideEffectFree) {
        List<Sample> own = samples(config, modelDirectory, files);
        if (!own.isEmpty()) {
            return own;
        }
        int count = builtinCount(config, hostDefault && sideEffectFree);
        if (count == 0) {
            return List.of();
        }
        InferenceRequest r = builtinRequest(config);
        return r == null ? List.of() : List.of(new Sample(BUILTIN, r, count, true));
    }

    /** 0 when off, else how many times the built-in sample runs; {@code byDefault}: when the model's config says nothing. */
    static int builtinCount(ModelConfig config, boolean byDefault) {
        String v = config.parameters().get(PARAMETER);
        if (v == null || v.isBlank()) {
            return byDefault ? BUILTIN_COUNT : 0;
        }
        String t = v.trim().toLowerCase(java.util.Locale.ROOT);
        switch (t) {
            case "true", "on", "yes" -> {
                return BUILTIN_COUNT;
            }
            case "false", "off", "no" -> {
                return 0;
            }
            default -> {
                try {
                    int n = Integer.parseInt(t);
                    if (n >= 0 && n <= MAX_BUILTIN_COUNT) {
                        return n;
                    }
                } catch (NumberFormatException e) {
                    // below
                }
                throw BackplaneException.invalid("model '" + config.name() + "': parameter " + PARAMETER + " is '" + v + "'; give true, false,"
                        + " or how many built-in warm-up requests to send (0.." + MAX_BUILTIN_COUNT + ")");
            }
        }
    }

    /** The built-in sample's request, or null (with a debug line) when the config does not say enough to make one. */
    static @Nullable InferenceRequest builtinRequest(ModelConfig config) {
        String model = config.name();
        if (config.sequenceBatching() != null) {
            log.debug("model '{}': no built-in warm-up (a sequence batcher needs a sequence id and control inputs; give it a model_warmup)", model);
            return null;
        }
        for (ConfigNode in : config.raw().sections("input")) {
            if (in.value("is_shape_tensor").orElse("false").equals("true")) {
                log.debug("model '{}': no built-in warm-up (input '{}' is a shape tensor, whose values zeros cannot stand for; give it a model_warmup)",
                        model, in.value("name").orElse(""));
                return null;
            }
        }
        InferenceRequest.Builder b = InferenceRequest.builder(model).id("warmup-" + BUILTIN);
        for (var in : config.inputs()) {
            if (in.optional()) {
                continue;
            }
            List<Long> dims = in.dims();
            long[] shape = new long[dims.size() + (config.batches() ? 1 : 0)];
            int at = 0;
            if (config.batches()) {
                shape[at++] = 1;
            }
            long elements = 1;
            for (long d : dims) {
                long n = d < 0 ? 1 : d;
                shape[at++] = n;
                elements = Math.multiplyExact(elements, n);
            }
            if (in.dataType() == DataType.BYTES) {
                List<byte[]> empty = new ArrayList<>();
                for (long i = 0; i < elements; i++) {
                    empty.add(new byte[0]);
                }
                b.input(Tensor.ofBytes(in.name(), shape, empty));
            } else if (in.dataType().byteSize() <= 0 || elements * in.dataType().byteSize() > 64L << 20) {
                log.debug("model '{}': no built-in warm-up (input '{}' of {} and {} elements cannot be made up; give it a model_warmup)", model,
                        in.name(), in.dataType(), elements);
                return null;
            } else {
                b.input(Tensor.ofRaw(in.name(), in.dataType(), shape, new byte[Math.toIntExact(elements * in.dataType().byteSize())]));
            }
        }
        return b.build();
    }

    private Warmup() {
    }

    /**
     * The samples of {@code config}, their data built (files read from {@code <modelDirectory>/warmup/},
     * really under {@code files}' root, links followed).
     *
     * @throws BackplaneException INVALID_ARGUMENT naming the sample and input when data cannot be made
     */
    static List<Sample> samples(ModelConfig config, Path modelDirectory, FileRoot files) {
        List<Sample> out = new ArrayList<>();
        for (ConfigNode w : config.raw().sections("model_warmup")) {
            String name = w.value("name").orElse("");
            String what = "model '" + config.name() + "' warm-up sample '" + name + "'";
            int batch = Integer.parseInt(w.value("batch_size").orElse("1"));
            int count = Math.clamp(Long.parseLong(w.value("count").orElse("0")), 1, Integer.MAX_VALUE);
            InferenceRequest.Builder b = InferenceRequest.builder(config.name()).id("warmup-" + name);
            for (ConfigNode entry : w.sections("inputs")) {
                String input = entry.value("key").orElse("");
                ConfigNode in = entry.section("value").orElse(ConfigNode.EMPTY);
                b.input(tensor(what + " input '" + input + "'", input, in, config.batches() ? batch : 0, modelDirectory, files));
            }
            out.add(new Sample(name, b.build(), count));
        }
        return List.copyOf(out);
    }

    private static Tensor tensor(String what, String name, ConfigNode in, int batch, Path modelDirectory, FileRoot files) {
        DataType type = DataType.fromConfigName(in.value("data_type").orElse("TYPE_INVALID"));
        List<Long> dims = in.values("dims").stream().map(Long::parseLong).toList();
        long[] shape = new long[dims.size() + (batch > 0 ? 1 : 0)];
        int at = 0;
        if (batch > 0) {
            shape[at++] = batch;
        }
        for (long d : dims) {
            shape[at++] = d;
        }
        long perSample = 1;
        for (long d : dims) {
            perSample = Math.multiplyExact(perSample, d);
        }
        int copies = Math.max(batch, 1);
        long elements = Math.multiplyExact(perSample, copies);
        String file = in.value("input_data_file").orElse("");
        if (!file.isEmpty()) {
            Path path = ModelFiles.inside(modelDirectory.resolve("warmup"), file, what + " input_data_file", files);
            byte[] one;
            try {
                one = Files.readAllBytes(path);
            } catch (IOException e) {
                throw new BackplaneException(ErrorCode.INVALID_ARGUMENT, what + ": cannot read " + path + ": " + e, e);
            }
            if (type == DataType.BYTES) {
                long found = Tensor.countBytesElements(name, MemorySegment.ofArray(one));
                if (found != perSample) {
                    throw BackplaneException.invalid(what + ": " + path + " holds " + found + " BYTES elements (4-byte little-endian length"
                            + " before each) but dims " + dims + " need " + perSample);
                }
            } else if (one.length != perSample * type.byteSize()) {
                throw BackplaneException.invalid(what + ": " + path + " has " + one.length + " bytes but " + type + " dims " + dims + " need "
                        + perSample * type.byteSize() + " (one sample, row-major; it is repeated for each of the batch_size items)");
            }
            byte[] all = new byte[Math.multiplyExact(one.length, copies)];
            for (int i = 0; i < copies; i++) {
                System.arraycopy(one, 0, all, i * one.length, one.length);
            }
            return Tensor.ofRaw(name, type, shape, all);
        }
        boolean random = in.value("random_data").orElse("false").equals("true");
        if (type == DataType.BYTES) {
            // Triton's random BYTES data is not meaningful either: empty strings stand in for both.
            List<byte[]> empty = new ArrayList<>();
            for (long i = 0; i < elements; i++) {
                empty.add(new byte[0]);
            }
            return Tensor.ofBytes(name, shape, empty);
        }
        byte[] data = new byte[Math.toIntExact(elements * type.byteSize())];
        if (random) {
            SplittableRandom rnd = new SplittableRandom();
            switch (type) {
                case FP32, FP64, FP16, BF16 -> fillFloats(type, data, rnd);
                case BOOL -> {
                    for (int i = 0; i < data.length; i++) {
                        data[i] = (byte) rnd.nextInt(2);
                    }
                }
                default -> {
                    for (int i = 0; i < data.length; i++) {
                        data[i] = (byte) rnd.nextInt(256);
                    }
                }
            }
        }
        return Tensor.ofRaw(name, type, shape, data);
    }

    /** Random values in [0, 1): random bits would include NaN and infinities. */
    private static void fillFloats(DataType type, byte[] data, SplittableRandom rnd) {
        int n = data.length / type.byteSize();
        float[] values = new float[n];
        for (int i = 0; i < n; i++) {
            values[i] = (float) rnd.nextDouble();
        }
        Tensor t = switch (type) {
            case FP16 -> Tensor.ofFloat16s("r", new long[] {n}, values);
            case BF16 -> Tensor.ofBFloat16s("r", new long[] {n}, values);
            case FP64 -> {
                double[] d = new double[n];
                for (int i = 0; i < n; i++) {
                    d[i] = values[i];
                }
                yield Tensor.ofDoubles("r", new long[] {n}, d);
            }
            default -> Tensor.ofFloats("r", new long[] {n}, values);
        };
        System.arraycopy(t.toByteArray(), 0, data, 0, data.length);
    }

    /**
     * Runs every sample, {@code count} times each, one request at a time, through {@code admit}.
     *
     * @throws BackplaneException naming the sample that failed, with its error
     */
    static void run(String model, List<Sample> samples, BiFunction<InferenceRequest, ResponseSink, RequestState> admit) {
        run(model, samples, admit, System::nanoTime);
    }

    /** {@link #run(String, List, BiFunction)} with the clock that bounds the built-in sample ({@link #BUILTIN_BUDGET}). */
    static void run(String model, List<Sample> samples, BiFunction<InferenceRequest, ResponseSink, RequestState> admit, LongSupplier nanoClock) {
        run(model, samples, admit, nanoClock, BUILTIN_BUDGET);
    }

    /** As above, with the built-in sample's budget (tests). */
    static void run(String model, List<Sample> samples, BiFunction<InferenceRequest, ResponseSink, RequestState> admit, LongSupplier nanoClock,
            Duration budget) {
        for (Sample s : samples) {
            if (s.builtIn()) {
                try {
                    long start = nanoClock.getAsLong();
                    LongSupplier left = () -> budget.toNanos() - (nanoClock.getAsLong() - start);
                    int sent = runSample(model, s, admit, left);
                    if (sent < s.count()) {
                        log.info("model '{}': the built-in warm-up stopped after {} of {} requests ({} ms, its budget is {} ms{}); a"
                                + " model_warmup of the model's own runs in full", model, sent, s.count(),
                                TimeUnit.NANOSECONDS.toMillis(nanoClock.getAsLong() - start), budget.toMillis(),
                                sent == 0 ? ": its first request was cancelled" : "");
                    }
                } catch (BackplaneException e) {
                    log.warn("{}; the model loads without it (switch it off with parameters {{ key: \"{}\" value: {{ string_value: \"false\" }} }},"
                            + " or give it a model_warmup)", e.getMessage(), PARAMETER);
                }
            } else {
                runSample(model, s, admit, null);
            }
        }
    }

    /**
     * Sends {@code request} through {@code admit} again and again, one at a time, until
     * {@code budget} has passed (the request still running then is cancelled); how many completed.
     * The host's own warm-up ({@link ModelRegistry#warmOwnPaths}).
     *
     * @throws BackplaneException when a request fails
     */
    static int runFor(String model, InferenceRequest request, BiFunction<InferenceRequest, ResponseSink, RequestState> admit, Duration budget) {
        long start = System.nanoTime();
        return runSample(model, new Sample(BUILTIN, request, Integer.MAX_VALUE, true), admit, () -> budget.toNanos() - (System.nanoTime() - start));
    }

    /**
     * Sends the sample's requests one at a time until {@code count} or until the budget that
     * {@code left} tells (nanoseconds; null: none) is used up; a request still running then is
     * cancelled and not counted. How many requests it completed.
     */
    private static int runSample(String model, Sample s, BiFunction<InferenceRequest, ResponseSink, RequestState> admit, @Nullable LongSupplier left) {
        {
            for (int i = 0; i < s.count(); i++) {
                if (left != null && left.getAsLong() <= 0) {
                    return i;
                }
                CompletableFuture<@Nullable Void> done = new CompletableFuture<>();
                ResponseSink sink = new Sink(done);
                @Nullable RequestState r;
                try {
                    r = admit.apply(s.request(), sink);
                } catch (BackplaneException e) {
                    throw failed(model, s, e);
                }
                try {
                    if (left == null) {
                        done.get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
                    } else {
                        try {
                            done.get(Math.max(0, left.getAsLong()), TimeUnit.NANOSECONDS);
                        } catch (TimeoutException e) {
                            if (r != null) {
                                r.cancel(); // the budget is spent: the model sees the cancellation, ready waits no longer
                            }
                            return i;
                        }
                    }
                } catch (ExecutionException e) {
                    throw failed(model, s, e.getCause());
                } catch (TimeoutException e) {
                    if (r != null) {
                        r.cancel();
                    }
                    throw failed(model, s, new BackplaneException(ErrorCode.DEADLINE_EXCEEDED, "no response within " + TIMEOUT.toSeconds() + " s"));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    if (r != null) {
                        r.cancel();
                    }
                    throw failed(model, s, new BackplaneException(ErrorCode.CANCELLED, "interrupted"));
                }
            }
            return s.count();
        }
    }

    /** Where a warm-up request's outcome goes; the admission knows it by its type (no response cache for warm-up). */
    record Sink(CompletableFuture<@Nullable Void> done) implements ResponseSink {
        @Override
        public void partial(InferenceResponse response) {
        }

        @Override
        public void last(@Nullable InferenceResponse last) {
            done.complete(null);
        }

        @Override
        public void failed(BackplaneException error) {
            done.completeExceptionally(error);
        }
    }

    private static BackplaneException failed(String model, Sample s, Throwable cause) {
        ErrorCode code = cause instanceof BackplaneException b ? b.code() : ErrorCode.INTERNAL;
        return new BackplaneException(code, "model '" + model + "': " + (s.builtIn() ? "the built-in warm-up" : "warm-up sample '" + s.name() + "'")
                + " failed: " + cause.getMessage(), cause);
    }
}
