package io.backplane.core.lifecycle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.testing.Hygiene;
import io.backplane.core.testing.ScriptedBackend;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code model_warmup} and the classification extension through the real embedded host: samples
 * run through the version's own instances before it is published, a failing sample fails the
 * load by name, and classified outputs come back as Triton's {@code value:index:label} strings.
 */
@Timeout(60)
class WarmupClassificationTest {
    @TempDir
    Path repo;

    private final ScriptedBackend backend = new ScriptedBackend();
    private final List<ScheduledRequest> seen = new CopyOnWriteArrayList<>();
    private @Nullable BackplaneHost host;

    @AfterEach
    void closeAndCheckHygiene() {
        if (host != null) {
            host.close();
            assertEquals(0, host.openRequests(), "open requests after close");
            assertEquals(backend.instancesCreated.get(), backend.instancesClosed.get(), "every instance closed");
            assertEquals(backend.modelsLoaded.get(), backend.modelsClosed.get(), "every model closed");
        }
        Hygiene.assertNoBackplaneThreads();
    }

    private Path model(String name, String config) throws IOException {
        Path dir = Files.createDirectories(repo.resolve(name));
        Files.writeString(dir.resolve("config.pbtxt"), "name: \"" + name + "\"\nbackend: \"scripted\"\n" + config);
        Files.writeString(Files.createDirectories(dir.resolve("1")).resolve("weights"), "v1");
        return dir;
    }

    private BackplaneHost explicitHost() {
        host = BackplaneHost.builder().backend(backend).modelRepository(repo).modelControlMode(ModelControlMode.EXPLICIT).build();
        return host;
    }

    /** Echoes IN as OUT and records every request it executes. */
    private void recordAndEcho(String model) {
        backend.on(model, (batch, inst) -> {
            for (ScheduledRequest r : batch) {
                seen.add(r);
                if (r.request().id().equals("warmup-bad")) {
                    throw new IllegalStateException("kernel not compiled for this shape");
                }
                r.sender().sendFinal(InferenceResponse.of(List.of(r.request().input("IN").withName("OUT"))));
            }
        });
    }

    private static byte[] floats(float... v) {
        ByteBuffer b = ByteBuffer.allocate(v.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        for (float f : v) {
            b.putFloat(f);
        }
        return b.array();
    }

    @Test
    void warmup_everySampleRunsCountTimesThroughTheInstances_beforeLoadReturns() throws Exception {
        Path dir = model("w", """
                max_batch_size: 4
                input [ { name: "IN" data_type: TYPE_FP32 dims: [ 3 ] } ]
                output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 3 ] } ]
                model_warmup [
                  { name: "zeros" batch_size: 2 count: 2 inputs { key: "IN" value: { data_type: TYPE_FP32 dims: [ 3 ] zero_data: true } } },
                  { name: "file" batch_size: 1 inputs { key: "IN" value: { data_type: TYPE_FP32 dims: [ 3 ] input_data_file: "in.bin" } } },
                  { name: "noise" batch_size: 1 inputs { key: "IN" value: { data_type: TYPE_FP32 dims: [ 3 ] random_data: true } } }
                ]
                """);
        Files.write(Files.createDirectories(dir.resolve("warmup")).resolve("in.bin"), floats(1.5f, 2.5f, 3.5f));
        recordAndEcho("w");
        BackplaneHost h = explicitHost();

        assertFalse(h.isModelReady("w"));
        h.load("w");

        assertEquals(List.of("warmup-zeros", "warmup-zeros", "warmup-file", "warmup-noise"), seen.stream().map(r -> r.request().id()).toList());
        Tensor zeros = seen.get(0).request().input("IN");
        assertArrayEquals(new long[] {2, 3}, zeros.shape());
        assertArrayEquals(new float[6], zeros.toFloatArray());
        assertArrayEquals(new float[] {1.5f, 2.5f, 3.5f}, seen.get(2).request().input("IN").toFloatArray());
        for (float f : seen.get(3).request().input("IN").toFloatArray()) {
            assertTrue(f >= 0 && f < 1, "random warm-up data is in [0, 1): " + f);
        }
        assertTrue(h.isModelReady("w"));
        InferenceResponse r = h.infer(InferenceRequest.builder("w").input(Tensor.ofFloats("IN", new long[] {1, 3}, 7, 8, 9)).build())
                .get(10, TimeUnit.SECONDS);
        assertArrayEquals(new float[] {7, 8, 9}, r.output("OUT").toFloatArray());
    }

    @Test
    void warmup_failingSample_failsTheLoadNamingIt_andClosesWhatItCreated() throws Exception {
        model("w", """
                input [ { name: "IN" data_type: TYPE_FP32 dims: [ 3 ] } ]
                output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 3 ] } ]
                model_warmup [
                  { name: "good" batch_size: 1 inputs { key: "IN" value: { data_type: TYPE_FP32 dims: [ 3 ] zero_data: true } } },
                  { name: "bad" batch_size: 1 inputs { key: "IN" value: { data_type: TYPE_FP32 dims: [ 3 ] zero_data: true } } }
                ]
                """);
        recordAndEcho("w");
        BackplaneHost h = explicitHost();

        BackplaneException e = assertThrows(BackplaneException.class, () -> h.load("w"));

        assertTrue(e.getMessage().contains("warm-up sample 'bad' failed") && e.getMessage().contains("kernel not compiled for this shape"),
                e.getMessage());
        assertFalse(h.isModelReady("w"));
        assertEquals(backend.instancesCreated.get(), backend.instancesClosed.get(), "the failed load closed its instances");
        assertEquals(backend.modelsLoaded.get(), backend.modelsClosed.get(), "the failed load closed its model");
    }

    @Test
    void warmup_dataFileOfTheWrongSizeOrMissing_failsTheLoadBeforeAnyInstanceStarts() throws Exception {
        Path dir = model("w", """
                input [ { name: "IN" data_type: TYPE_FP32 dims: [ 3 ] } ]
                output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 3 ] } ]
                model_warmup [ { name: "short" batch_size: 1 inputs { key: "IN" value: { data_type: TYPE_FP32 dims: [ 3 ] input_data_file: "in.bin" } } } ]
                """);
        recordAndEcho("w");
        BackplaneHost h = explicitHost();

        BackplaneException missing = assertThrows(BackplaneException.class, () -> h.load("w"));
        assertTrue(missing.getMessage().contains("warm-up sample 'short' input 'IN' input_data_file 'in.bin'")
                && missing.getMessage().contains("does not exist"), missing.getMessage());

        Files.write(Files.createDirectories(dir.resolve("warmup")).resolve("in.bin"), floats(1, 2));
        BackplaneException shortFile = assertThrows(BackplaneException.class, () -> h.load("w"));
        assertTrue(shortFile.getMessage().contains("has 8 bytes but FP32 dims [3] need 12"), shortFile.getMessage());
        assertEquals(0, backend.instancesCreated.get());
        assertTrue(seen.isEmpty());
    }

    @Test
    void classification_topClassesWithLabels_perBatchItem_highestFirst() throws Exception {
        Path dir = model("c", """
                max_batch_size: 8
                input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]
                output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "labels.txt" } ]
                """);
        Files.writeString(dir.resolve("labels.txt"), "cat\ndog\nbird\n"); // one label short: index 3 has none
        recordAndEcho("c");
        BackplaneHost h = explicitHost();
        h.load("c");

        InferenceResponse r = h.infer(InferenceRequest.builder("c").input(Tensor.ofFloats("IN", new long[] {2, 4}, 0.1f, 0.7f, 0.2f, 0f,
                0f, 0.25f, 0.5f, 0.75f)).requestClassification("OUT", 2).build()).get(10, TimeUnit.SECONDS);

        Tensor out = r.output("OUT");
        assertEquals(DataType.BYTES, out.dataType());
        assertArrayEquals(new long[] {2, 2}, out.shape());
        assertEquals(List.of("0.700000:1:dog", "0.200000:2:bird", "0.750000:3", "0.500000:2:bird"), out.toStringList());

        InferenceResponse all = h.infer(InferenceRequest.builder("c").input(Tensor.ofFloats("IN", new long[] {1, 4}, 4, 3, 2, 1))
                .requestClassification("OUT", 100).build()).get(10, TimeUnit.SECONDS);
        assertEquals(List.of("4.000000:0:cat", "3.000000:1:dog", "2.000000:2:bird", "1.000000:3"), all.output("OUT").toStringList(),
                "a count over the class count returns every class");
    }

    @Test
    void classification_nanScoresRankLast_tiesByLowerIndex() throws Exception {
        model("n", """
                input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]
                output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]
                """);
        recordAndEcho("n");
        BackplaneHost h = explicitHost();
        h.load("n");

        InferenceResponse r = h.infer(InferenceRequest.builder("n").input(Tensor.ofFloats("IN", new long[] {4}, Float.NaN, 0.5f, 0.9f, 0.5f))
                .requestClassification("OUT", 3).build()).get(10, TimeUnit.SECONDS);

        assertEquals(List.of("0.900000:2", "0.500000:1", "0.500000:3"), r.output("OUT").toStringList(),
                "a NaN score is not the top class; equal scores keep index order");
    }

    @Test
    void classification_ofANonNumericOutput_isRefusedBeforeQueueing_andAMissingLabelFileFailsTheLoad() throws Exception {
        model("s", """
                input [ { name: "IN" data_type: TYPE_STRING dims: [ 1 ] } ]
                output [ { name: "OUT" data_type: TYPE_STRING dims: [ 1 ] } ]
                """);
        model("nolabels", """
                input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
                output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] label_filename: "gone.txt" } ]
                """);
        recordAndEcho("s");
        BackplaneHost h = explicitHost();
        h.load("s");

        ExecutionException e = assertThrows(ExecutionException.class, () -> h.infer(InferenceRequest.builder("s")
                .input(Tensor.ofStrings("IN", new long[] {1}, "x")).requestClassification("OUT", 1).build()).get(10, TimeUnit.SECONDS));
        BackplaneException cause = assertInstanceOf(BackplaneException.class, e.getCause() instanceof CompletionException c ? c.getCause() : e.getCause());
        assertEquals(ErrorCode.INVALID_ARGUMENT, cause.code());
        assertTrue(cause.getMessage().contains("output 'OUT' is BYTES: classification needs a numeric output"), cause.getMessage());
        assertTrue(seen.isEmpty(), "refused before it reached the backend");
        BackplaneException zero = assertThrows(BackplaneException.class, () -> InferenceRequest.builder("s").requestClassification("OUT", 0));
        assertTrue(zero.getMessage().contains("classification count 0 must be ≥ 1"), zero.getMessage());

        BackplaneException load = assertThrows(BackplaneException.class, () -> h.load("nolabels"));
        assertTrue(load.getMessage().contains("label_filename 'gone.txt'") && load.getMessage().contains("does not exist"), load.getMessage());
    }
}
