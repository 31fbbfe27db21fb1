package io.backplane.testkit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import io.backplane.spi.host.HostListener;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.Test;

/** The instance harness on the real core: requests, exact batches, the door of execute, white-box access, the hygiene check. */
class ModelHarnessTest {
    private static final String PBTXT = """
            name: "copy"
            backend: "identity"
            max_batch_size: 4
            input [ { name: "IN0" data_type: TYPE_FP32 dims: [ -1 ] } ]
            output [ { name: "OUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
            """;

    private static InferenceRequest row(float... v) {
        return InferenceRequest.builder("copy").input(Tensor.ofFloats("IN0", new long[] {1, v.length}, v)).build();
    }

    private static HostListener batchSizes(List<Integer> sizes) {
        return new HostListener() {
            @Override
            public void batchExecuted(String model, long version, int requests, int batchSize) {
                sizes.add(requests);
            }
        };
    }

    @Test
    void infer_configTextThroughTheHostParser_answersEachRequestWithItsOwnPayload() throws Exception {
        try (ModelHarness h = ModelHarness.builder(new IdentityBackendFactory()).config(PBTXT).start()) {
            assertEquals(4, h.config().maxBatchSize());
            for (int i = 0; i < 5; i++) {
                InferenceResponse r = h.infer(row(i, -i));
                assertArrayEquals(new float[] {i, -i}, r.output("OUT0").toFloatArray());
            }
        }
    }

    @Test
    void config_invalidText_failsStartWithTheParsersMessage() {
        BackplaneException e = assertThrows(BackplaneException.class,
                () -> ModelHarness.builder(new IdentityBackendFactory()).config(PBTXT.replace("max_batch_size: 4", "max_batch_size: -1")).start());
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("max_batch_size"), e.getMessage());
    }

    @Test
    void batch_exactBatches_handsExactlyTheseRequestsToOneExecute() throws Exception {
        List<Integer> sizes = new CopyOnWriteArrayList<>();
        try (ModelHarness h = ModelHarness.builder(new IdentityBackendFactory()).config(PBTXT).exactBatches()
                .configureHost(b -> b.listener(batchSizes(sizes))).start()) {
            List<Reply> replies = h.batch(row(1), row(2), row(3));
            for (int i = 0; i < 3; i++) {
                assertArrayEquals(new float[] {i + 1}, replies.get(i).awaitSuccess().output("OUT0").toFloatArray());
            }
            h.infer(row(9));
            assertEquals(List.of(3, 1), sizes);
        }
    }

    @Test
    void batch_oneRequestRefusedByTheHost_isAnsweredAndLeftOut() throws Exception {
        List<Integer> sizes = new CopyOnWriteArrayList<>();
        try (ModelHarness h = ModelHarness.builder(new IdentityBackendFactory()).config(PBTXT).exactBatches()
                .configureHost(b -> b.listener(batchSizes(sizes))).start()) {
            InferenceRequest wrongType = InferenceRequest.builder("copy").input(Tensor.ofInts("IN0", new long[] {1, 1}, 5)).build();
            List<Reply> replies = h.batch(row(1), wrongType, row(3));
            assertEquals(ErrorCode.INVALID_ARGUMENT, replies.get(1).await().error().code());
            assertNull(replies.get(0).await().error());
            assertNull(replies.get(2).await().error());
            assertEquals(List.of(2), sizes);
        }
    }

    @Test
    void batch_withoutExactBatches_isRefusedClearly() throws Exception {
        try (ModelHarness h = ModelHarness.builder(new IdentityBackendFactory()).config(PBTXT).start()) {
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> h.batch(row(1)));
            assertTrue(e.getMessage().contains("exactBatches()"), e.getMessage());
        }
    }

    @Test
    void holdExecute_cancelAtTheDoor_backendSeesItCancelled() throws Exception {
        try (ModelHarness h = ModelHarness.builder(new ToyBackend(EnumSet.noneOf(ToyBackend.Fault.class))).model(ToyBackend.plain()).start()) {
            Reply r;
            try (ExecuteDoor door = h.holdExecute()) {
                r = h.send(ToyBackend.request(ToyBackend.plain(), 7));
                List<ScheduledRequest> batch = door.awaitBatch();
                assertEquals(1, batch.size());
                assertTrue(r.cancel());
                assertTrue(batch.getFirst().isCancelled(), "the backend's view of the request is the core's");
            }
            assertEquals(ErrorCode.CANCELLED, r.await().error().code());
            assertEquals(1, r.terminals());
        }
    }

    @Test
    void whiteBox_backendModelAndInstance_areTheBackendsOwnObjects() throws Exception {
        try (ModelHarness h = ModelHarness.builder(new IdentityBackendFactory()).config(PBTXT).start()) {
            ModelInstance i = h.instance(ModelInstance.class);
            assertSame(i, h.instances(ModelInstance.class).getFirst());
            assertTrue(i.getClass().getName().startsWith(IdentityBackendFactory.class.getName()), i.getClass().getName());
            assertEquals("copy", h.modelContext().name());
            assertEquals(h.modelContext(), h.instanceContext().model());
            h.unload();
            assertFalse(h.isReady());
            assertThrows(IllegalStateException.class, () -> h.instance(ModelInstance.class));
            h.load();
            assertArrayEquals(new float[] {5}, h.infer(row(5)).output("OUT0").toFloatArray());
            assertEquals(2, h.instancesCreated());
        }
    }

    @Test
    void close_backendLeavesAThread_failsL10NamingIt() throws Exception {
        ToyBackend.release = new CountDownLatch(1);
        ModelHarness h = ModelHarness.builder(new ToyBackend(EnumSet.of(ToyBackend.Fault.LEAK_THREAD))).model(ToyBackend.plain())
                .answerTimeout(java.time.Duration.ofMillis(300)).start();
        try {
            AssertionError e = assertThrows(AssertionError.class, h::close);
            assertTrue(e.getMessage().startsWith("[L10 shutdown] model 'echo': thread(s) still alive"), e.getMessage());
            assertTrue(e.getMessage().contains("toy-leaky"), e.getMessage());
        } finally {
            ToyBackend.release.countDown();
        }
    }

    @Test
    void identityBackend_model_copiesInputToOutput() throws Exception {
        ModelConfig c = IdentityBackendFactory.model("id", 2);
        try (ModelHarness h = ModelHarness.builder(new IdentityBackendFactory()).model(c).start()) {
            assertEquals(2, h.instancesCreated());
            InferenceResponse r = h.infer(InferenceRequest.builder("id").input(Tensor.ofFloats("IN0", new long[] {3}, 1, 2, 3)).build());
            assertArrayEquals(new float[] {1, 2, 3}, r.output("OUT0").toFloatArray());
            assertEquals(List.of(TensorConfig.of("OUT0", DataType.FP32, -1)), h.config().outputs());
        }
    }
}
