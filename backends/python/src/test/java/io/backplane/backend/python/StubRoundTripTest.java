package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import io.backplane.testkit.Reply;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Requests and responses of random shapes and datatypes cross the stub's binary layout both ways
 * unchanged: batches of 1 to 4 requests, 1 to 4 inputs each, from empty tensors to ones past the
 * scratch blocks of both sides (the execution message's and the stub's result scratch), so the
 * scratch and the allocated paths alternate within one stub.
 */
class StubRoundTripTest {
    private static final DataType[] TYPES = {DataType.BOOL, DataType.UINT8, DataType.UINT16, DataType.UINT32, DataType.UINT64,
        DataType.INT8, DataType.INT16, DataType.INT32, DataType.INT64, DataType.FP16, DataType.FP32, DataType.FP64, DataType.BYTES};
    private static final int MAX_BATCH = 8;

    @BeforeAll
    static void python() throws Exception {
        Harness.requirePython();
    }

    @AfterEach
    void clean() throws Exception {
        Harness.assertClean();
    }

    @Test
    void randomShapesAndDatatypes_roundTripUnchanged() throws Exception {
        long seed = new Random().nextLong();
        Random rnd = new Random(seed);
        try (Harness h = new Harness(echoAll(), Map.of())) {
            for (int round = 0; round < 60; round++) {
                int n = 1 + rnd.nextInt(4);
                InferenceRequest[] batch = new InferenceRequest[n];
                for (int i = 0; i < n; i++) {
                    batch[i] = randomRequest(rnd, round, i);
                }
                List<Reply> replies = h.run(batch);
                for (int i = 0; i < n; i++) {
                    InferenceResponse resp = replies.get(i).awaitSuccess();
                    for (Tensor in : batch[i].inputs()) {
                        String what = "seed " + seed + " round " + round + " request " + i + " input " + in.name() + " "
                                + in.dataType() + Arrays.toString(in.shape());
                        Tensor out = resp.output("OUT_" + in.name().substring(3));
                        assertNotNull(out, what + ": no output");
                        assertEquals(in.dataType(), out.dataType(), what);
                        assertArrayEquals(in.shape(), out.shape(), what);
                        if (in.dataType() == DataType.BYTES) {
                            List<byte[]> a = in.toBytesList();
                            List<byte[]> b = out.toBytesList();
                            assertEquals(a.size(), b.size(), what);
                            for (int k = 0; k < a.size(); k++) {
                                assertArrayEquals(a.get(k), b.get(k), what + " element " + k);
                            }
                        } else {
                            assertArrayEquals(in.toByteArray(), out.toByteArray(), what);
                        }
                    }
                }
            }
            assertEquals(1, h.stub().generation(), "the stub was restarted (seed " + seed + ")");
        }
    }

    /** One input per datatype and rank (1 to 3 after the batch dimension), each optional. */
    private static ModelConfig echoAll() {
        ModelConfig.Builder b = ModelConfig.builder("echo_all").backend("python").maxBatchSize(MAX_BATCH);
        for (DataType t : TYPES) {
            for (int rank = 1; rank <= 3; rank++) {
                long[] dims = new long[rank];
                Arrays.fill(dims, -1);
                b.input(TensorConfig.builder("IN_" + t + "_" + rank, t).dims(dims).optional(true).build());
                b.output(TensorConfig.of("OUT_" + t + "_" + rank, t, dims));
            }
        }
        return b.build();
    }

    private static InferenceRequest randomRequest(Random rnd, int round, int index) {
        InferenceRequest.Builder b = InferenceRequest.builder("echo_all").id("r" + round + "-" + index);
        int inputs = 1 + rnd.nextInt(4);
        List<String> used = new ArrayList<>();
        long batch = 1 + rnd.nextInt(2);
        while (used.size() < inputs) {
            DataType t = TYPES[rnd.nextInt(TYPES.length)];
            int rank = 1 + rnd.nextInt(3);
            String name = "IN_" + t + "_" + rank;
            if (used.contains(name)) {
                continue;
            }
            used.add(name);
            long[] shape = new long[rank + 1];
            shape[0] = batch;
            // Mostly a few elements (the scratch paths), sometimes none, sometimes past 64 KiB.
            long elements = switch (rnd.nextInt(10)) {
                case 0 -> 0;
                case 1 -> 20_000 + rnd.nextInt(20_000);
                default -> 1 + rnd.nextInt(16);
            };
            long total = batch;
            for (int d = 1; d <= rank; d++) {
                shape[d] = d == rank ? elements : 1 + rnd.nextInt(3);
                total *= shape[d];
            }
            b.input(tensor(rnd, name, t, shape, total));
        }
        return b.build();
    }

    private static Tensor tensor(Random rnd, String name, DataType t, long[] shape, long count) {
        if (t == DataType.BYTES) {
            List<byte[]> elements = new ArrayList<>();
            for (long i = 0; i < count; i++) {
                byte[] e = new byte[rnd.nextInt(rnd.nextInt(10) == 0 ? 300 : 8)];
                rnd.nextBytes(e);
                elements.add(e);
            }
            return Tensor.ofBytes(name, shape, elements);
        }
        byte[] data = new byte[Math.toIntExact(count * t.byteSize())];
        rnd.nextBytes(data);
        if (t == DataType.BOOL) {
            for (int i = 0; i < data.length; i++) {
                data[i] &= 1;
            }
        }
        return Tensor.ofRaw(name, t, shape, data);
    }
}
