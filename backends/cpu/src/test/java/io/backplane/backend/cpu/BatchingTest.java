package io.backplane.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.testkit.ExecuteDoor;
import io.backplane.testkit.ModelHarness;
import io.backplane.testkit.Reply;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** Dynamic batching: concatenation along the first dimension, per-request split, grouping by shape, per-request errors. */
class BatchingTest {
    @AfterEach
    void sessionsClosed() {
        assertEquals(0, OnnxModel.openSessions(), "sessions left open");
    }

    /** Rows whose values are unique to (request, row, column), so a swap between requests cannot pass. */
    private static float[] rows(int request, int rows, int cols) {
        float[] v = new float[rows * cols];
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++) {
                v[r * cols + c] = request * 1000 + r * 10 + c + 0.5f;
            }
        }
        return v;
    }

    private static InferenceRequest addSub(int request, int rows) {
        float[] a = rows(request, rows, 4);
        float[] b = new float[a.length];
        for (int i = 0; i < b.length; i++) {
            b[i] = i * 0.25f;
        }
        return TestModels.request("add_sub", Tensor.ofFloats("INPUT0", new long[] {rows, 4}, a), Tensor.ofFloats("INPUT1", new long[] {rows, 4}, b));
    }

    @Test
    void execute_requestsWithDifferentRowCounts_eachGetsItsOwnRows() throws Exception {
        try (ModelHarness m = TestModels.start(TestModels.addSub())) {
            int[] rowCounts = {1, 3, 2, 1, 1}; // 8 rows = max_batch_size
            InferenceRequest[] requests = new InferenceRequest[rowCounts.length];
            for (int i = 0; i < requests.length; i++) {
                requests[i] = addSub(i, rowCounts[i]);
            }
            List<InferenceResponse> responses = m.run(requests);
            for (int i = 0; i < requests.length; i++) {
                InferenceResponse r = responses.get(i);
                assertFalse(r.isError(), () -> String.valueOf(r.error()));
                float[] a = requests[i].input("INPUT0").toFloatArray();
                float[] b = requests[i].input("INPUT1").toFloatArray();
                float[] sum = r.output("OUTPUT0").toFloatArray();
                float[] diff = r.output("OUTPUT1").toFloatArray();
                assertArrayEquals(new long[] {rowCounts[i], 4}, r.output("OUTPUT0").shape());
                for (int k = 0; k < a.length; k++) {
                    assertEquals(a[k] + b[k], sum[k], "request " + i + " OUTPUT0[" + k + "]");
                    assertEquals(a[k] - b[k], diff[k], "request " + i + " OUTPUT1[" + k + "]");
                }
            }
        }
    }

    @Test
    void execute_differentNonBatchShapesInOneBatch_groupedAndAnsweredCorrectly() throws Exception {
        try (ModelHarness m = TestModels.start(TestModels.dynamicDim())) {
            int[][] shapes = {{1, 3}, {2, 5}, {2, 3}, {1, 5}, {1, 1}};
            InferenceRequest[] requests = new InferenceRequest[shapes.length];
            for (int i = 0; i < shapes.length; i++) {
                requests[i] = TestModels.request("dynamic_dim",
                        Tensor.ofFloats("INPUT0", new long[] {shapes[i][0], shapes[i][1]}, rows(i, shapes[i][0], shapes[i][1])));
            }
            List<InferenceResponse> responses = m.run(requests);
            for (int i = 0; i < shapes.length; i++) {
                InferenceResponse r = responses.get(i);
                assertFalse(r.isError(), () -> String.valueOf(r.error()));
                float[] x = requests[i].input("INPUT0").toFloatArray();
                assertArrayEquals(new long[] {shapes[i][0], shapes[i][1]}, r.output("OUTPUT0").shape());
                assertArrayEquals(new long[] {shapes[i][0], 1}, r.output("OUTPUT1").shape());
                float[] doubled = r.output("OUTPUT0").toFloatArray();
                float[] sums = r.output("OUTPUT1").toFloatArray();
                for (int k = 0; k < x.length; k++) {
                    assertEquals(2 * x[k], doubled[k], "request " + i + " OUTPUT0[" + k + "]");
                }
                for (int row = 0; row < shapes[i][0]; row++) {
                    float s = 0;
                    for (int c = 0; c < shapes[i][1]; c++) {
                        s += x[row * shapes[i][1] + c];
                    }
                    assertEquals(s, sums[row], Math.abs(s) * 1e-6f, "request " + i + " OUTPUT1[" + row + "]");
                }
            }
        }
    }

    @Test
    void execute_inputInNativeMemory_readInPlaceAndAnswered() throws Exception {
        try (ModelHarness m = TestModels.start(TestModels.addSub()); Arena arena = Arena.ofShared()) {
            MemorySegment a = arena.allocate(2 * 4 * 4, 64);
            MemorySegment b = arena.allocate(2 * 4 * 4, 64);
            ValueLayout.OfFloat le = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
            for (int i = 0; i < 8; i++) {
                a.setAtIndex(le, i, i);
                b.setAtIndex(le, i, 100 * i);
            }
            // INPUT0 read-only and in place; INPUT1 misaligned for FP32 (copied first)
            MemorySegment unaligned = arena.allocate(2 * 4 * 4 + 1, 64).asSlice(1);
            MemorySegment.copy(b, 0, unaligned, 0, b.byteSize());
            InferenceResponse r = m.infer(TestModels.request("add_sub", Tensor.of("INPUT0", DataType.FP32, new long[] {2, 4}, a.asReadOnly()),
                    Tensor.of("INPUT1", DataType.FP32, new long[] {2, 4}, unaligned)));
            assertFalse(r.isError(), () -> String.valueOf(r.error()));
            float[] sum = r.output("OUTPUT0").toFloatArray();
            for (int i = 0; i < 8; i++) {
                assertEquals(101f * i, sum[i]);
            }
            // issue 25: an output whose shape follows from the inputs' is written by ORT into the response's memory (no copy)
            assertTrue(r.output("OUTPUT0").data().isNative(), "a pre-sized output is ORT's own write into native memory");
        }
    }

    @Test
    void execute_requestedOutputs_onlyThoseReturned() throws Exception {
        try (ModelHarness m = TestModels.start(TestModels.addSub())) {
            InferenceRequest onlyDiff = addSub(1, 2).toBuilder().requestOutput("OUTPUT1").build();
            List<InferenceResponse> rs = m.run(onlyDiff, addSub(2, 1));
            assertEquals(List.of("OUTPUT1"), rs.get(0).outputs().stream().map(Tensor::name).toList());
            assertEquals(List.of("OUTPUT0", "OUTPUT1"), rs.get(1).outputs().stream().map(Tensor::name).toList());
        }
    }

    @Test
    void execute_oneInvalidRequestInBatch_onlyItFails() throws Exception {
        try (ModelHarness m = TestModels.start(TestModels.addSub())) {
            InferenceRequest bad = TestModels.request("add_sub", Tensor.ofFloats("INPUT0", new long[] {1, 3}, 1, 2, 3),
                    Tensor.ofFloats("INPUT1", new long[] {1, 3}, 1, 2, 3));
            List<InferenceResponse> rs = m.run(addSub(0, 1), bad, addSub(2, 2));
            assertFalse(rs.get(0).isError());
            assertTrue(rs.get(1).isError());
            assertEquals(ErrorCode.INVALID_ARGUMENT, rs.get(1).error().code());
            assertFalse(rs.get(2).isError());
            float expected = rows(2, 2, 4)[7] + 7 * 0.25f;
            assertEquals(expected, rs.get(2).output("OUTPUT0").toFloatArray()[7]);
        }
    }

    /**
     * The batch is held at the door of execute while one request is cancelled and another is
     * answered by someone else (as the core does when a timeout wins): the backend runs only the
     * third, answers the cancelled one with CANCELLED and leaves the answered one alone.
     */
    @Test
    void execute_cancelledOrAlreadyAnswered_notRunAgain() throws Exception {
        try (ModelHarness m = TestModels.start(TestModels.addSub())) {
            List<Reply> replies;
            try (ExecuteDoor door = m.holdExecute()) {
                replies = m.batch(addSub(0, 1), addSub(1, 1), addSub(2, 1));
                List<ScheduledRequest> atDoor = door.awaitBatch();
                assertTrue(replies.get(0).cancel(), "the first request was still open at the door");
                atDoor.get(1).sender().sendError(io.backplane.spi.BackplaneException.internal("answered elsewhere"));
            }
            assertEquals(ErrorCode.CANCELLED, replies.get(0).await().error().code());
            assertEquals("answered elsewhere", replies.get(1).await().error().getMessage());
            assertNull(replies.get(2).await().error());
            assertEquals(1, replies.get(1).terminals(), "the answered request was not answered again");
        }
    }

    @Test
    void execute_stringsOfDifferentRequests_concatenatedAndSplit() throws Exception {
        try (ModelHarness m = TestModels.start(TestModels.identity(DataType.BYTES))) {
            List<InferenceResponse> rs = m.run(
                    TestModels.request("identity_bytes", Tensor.ofStrings("INPUT0", new long[] {1, 2}, "a", "bé")),
                    TestModels.request("identity_bytes", Tensor.ofStrings("INPUT0", new long[] {2, 2}, "c", "", "✓", "dd")));
            assertEquals(List.of("a", "bé"), rs.get(0).output("OUTPUT0").toStringList());
            assertEquals(List.of("c", "", "✓", "dd"), rs.get(1).output("OUTPUT0").toStringList());
            assertArrayEquals(new long[] {2, 2}, rs.get(1).output("OUTPUT0").shape());
        }
    }
}
