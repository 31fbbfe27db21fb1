package io.backplane.core.internal;

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
import org.jspecify.annotations.Nullable;

/**
 * Triton's {@code model_warmup}: each sample becomes a request (zero, random or file data, of the
 * sample's type and shape, with {@code batch_size} along the batch dimension) sent {@code count}
 * times (at least once) through the version's own admission, batcher and instances before the
 * version is published, so the model reports ready only after its warm-up ran. The first failing
 * sample fails the load, named.
 */
final class Warmup {
    /** How long one warm-up request may take before the load fails. */
    static final Duration TIMEOUT = Duration.ofMinutes(2);

    /** The requests of one sample. */
    record Sample(String name, InferenceRequest request, int count) {
    }

    private Warmup() {
    }

    /**
     * The samples of {@code config}, their data built (files read from {@code <modelDirectory>/warmup/}).
     *
     * @throws BackplaneException INVALID_ARGUMENT naming the sample and input when data cannot be made
     */
    static List<Sample> samples(ModelConfig config, Path modelDirectory) {
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
                b.input(tensor(what + " input '" + input + "'", input, in, config.batches() ? batch : 0, modelDirectory));
            }
            out.add(new Sample(name, b.build(), count));
        }
        return List.copyOf(out);
    }

    private static Tensor tensor(String what, String name, ConfigNode in, int batch, Path modelDirectory) {
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
            Path path = ModelFiles.inside(modelDirectory.resolve("warmup"), file, what + " input_data_file");
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
        for (Sample s : samples) {
            for (int i = 0; i < s.count(); i++) {
                CompletableFuture<@Nullable Void> done = new CompletableFuture<>();
                ResponseSink sink = new Sink(done);
                RequestState r;
                try {
                    r = admit.apply(s.request(), sink);
                } catch (BackplaneException e) {
                    throw failed(model, s, e);
                }
                try {
                    done.get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
                } catch (ExecutionException e) {
                    throw failed(model, s, e.getCause());
                } catch (TimeoutException e) {
                    r.cancel();
                    throw failed(model, s, new BackplaneException(ErrorCode.DEADLINE_EXCEEDED, "no response within " + TIMEOUT.toSeconds() + " s"));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    r.cancel();
                    throw failed(model, s, new BackplaneException(ErrorCode.CANCELLED, "interrupted"));
                }
            }
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
        return new BackplaneException(code, "model '" + model + "': warm-up sample '" + s.name() + "' failed: " + cause.getMessage(), cause);
    }
}
