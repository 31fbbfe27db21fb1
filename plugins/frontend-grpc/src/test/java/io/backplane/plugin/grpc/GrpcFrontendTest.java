package io.backplane.plugin.grpc;

import io.backplane.plugin.http.TestBackend;
import io.backplane.plugin.http.TestSupport;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.protocol.inference.CudaSharedMemoryRegisterRequest;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.InferParameter;
import io.backplane.protocol.inference.LogSettingsRequest;
import io.backplane.protocol.inference.InferTensorContents;
import io.backplane.protocol.inference.ModelConfigRequest;
import io.backplane.protocol.inference.ModelConfigResponse;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelInferResponse;
import io.backplane.protocol.inference.ModelMetadataRequest;
import io.backplane.protocol.inference.ModelMetadataResponse;
import io.backplane.protocol.inference.ModelReadyRequest;
import io.backplane.protocol.inference.ModelStatisticsRequest;
import io.backplane.protocol.inference.ModelStreamInferResponse;
import io.backplane.protocol.inference.RepositoryIndexRequest;
import io.backplane.protocol.inference.RepositoryIndexResponse;
import io.backplane.protocol.inference.RepositoryModelLoadRequest;
import io.backplane.protocol.inference.RepositoryModelUnloadRequest;
import io.backplane.protocol.inference.ServerLiveRequest;
import io.backplane.protocol.inference.ServerMetadataRequest;
import io.backplane.protocol.inference.ServerMetadataResponse;
import io.backplane.protocol.inference.ServerReadyRequest;
import io.backplane.protocol.inference.TraceSettingRequest;
import io.backplane.spi.DataType;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** A started gRPC server exercised by grpc-java clients: the stubs generated from Triton's grpc_service.proto in backplane-protocol. */
class GrpcFrontendTest {
    TestBackend backend;
    BackplaneHost host;
    GrpcFrontend frontend;
    ManagedChannel channel;
    GRPCInferenceServiceGrpc.GRPCInferenceServiceBlockingStub client;
    GRPCInferenceServiceGrpc.GRPCInferenceServiceStub async;
    int port;

    @BeforeEach
    void start() throws Exception {
        backend = new TestBackend();
        host = BackplaneHost.builder().backend(backend).modelControlMode(ModelControlMode.EXPLICIT).unloadTimeout(Duration.ofSeconds(5))
                .model(TestBackend.identity("identity", DataType.FP32))
                .model(TestBackend.allTypes("all_types"))
                .model(rateLimited(TestBackend.repeat("repeat")))
                .model(TestBackend.slow("slow"))
                .model(TestBackend.failing("fail"))
                .model(TestBackend.identity("spare", DataType.INT32))
                .model(ModelConfig.builder("simple").backend(TestBackend.NAME).maxBatchSize(8)
                        .input(TensorConfig.of("INPUT0", DataType.INT32, 16)).input(TensorConfig.of("INPUT1", DataType.INT32, 16))
                        .output(TensorConfig.of("OUTPUT0", DataType.INT32, 16)).output(TensorConfig.of("OUTPUT1", DataType.INT32, 16)).build())
                .loadModel("simple").loadModel("identity").loadModel("all_types").loadModel("repeat").loadModel("slow").loadModel("fail")
                .build();
        frontend = (GrpcFrontend) new GrpcFrontendFactory().create(TestSupport.context(host,
                Map.of("host", "127.0.0.1", "port", "0", "max_message_bytes", "65536")));
        frontend.start();
        port = frontend.port();
        channel = Grpc.newChannelBuilderForAddress("127.0.0.1", port, InsecureChannelCredentials.create()).build();
        client = GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(30, TimeUnit.SECONDS);
        async = GRPCInferenceServiceGrpc.newStub(channel).withDeadlineAfter(30, TimeUnit.SECONDS);
    }

    @AfterEach
    void stop() throws Exception {
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        frontend.close();
        host.close();
        TestSupport.assertPortClosed(port);
        TestSupport.assertNoBackplaneThreads();
    }

    static ModelInferRequest fp32(String model, float... values) {
        ByteBuffer b = ByteBuffer.allocate(values.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        for (float v : values) {
            b.putFloat(v);
        }
        return ModelInferRequest.newBuilder().setModelName(model).setId("id-" + values.length)
                .addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("IN0").setDatatype("FP32").addShape(values.length))
                .addRawInputContents(ByteString.copyFrom(b.array())).build();
    }

    static float[] floats(ByteString raw) {
        ByteBuffer b = raw.asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
        float[] f = new float[b.remaining() / 4];
        for (int i = 0; i < f.length; i++) {
            f[i] = b.getFloat();
        }
        return f;
    }

    static Status.Code code(Runnable r) {
        return assertThrows(StatusRuntimeException.class, r::run).getStatus().getCode();
    }

    void assertStillServes() {
        ModelInferResponse r = client.modelInfer(fp32("identity", 4f));
        assertArrayEquals(new float[] {4f}, floats(r.getRawOutputContents(0)));
    }

    /** {@code config} with one CPU instance whose group has a rate_limiter (the host's limiter is off: parsed, shown, ignored). */
    private static io.backplane.spi.config.ModelConfig rateLimited(io.backplane.spi.config.ModelConfig config) {
        return config.toBuilder().instanceGroups(java.util.List.of(io.backplane.spi.config.InstanceGroup.builder(config.name() + "_0")
                .kind(io.backplane.spi.config.InstanceKind.CPU).rateLimiter(io.backplane.spi.config.RateLimiterConfig.of(
                        java.util.List.of(io.backplane.spi.config.RateLimiterConfig.Resource.of("R1", true, 2)), 3)).build())).build();
    }

    @Test
    void health_liveReadyAndServerMetadata() {
        assertTrue(client.serverLive(ServerLiveRequest.getDefaultInstance()).getLive());
        assertTrue(client.serverReady(ServerReadyRequest.getDefaultInstance()).getReady());
        ServerMetadataResponse md = client.serverMetadata(ServerMetadataRequest.getDefaultInstance());
        assertEquals("backplane", md.getName());
        assertEquals(host.version(), md.getVersion());
        assertTrue(md.getExtensionsList().contains("model_repository"));
    }

    @Test
    void modelReadyMetadataConfig_knownAndUnknown() {
        assertTrue(client.modelReady(ModelReadyRequest.newBuilder().setName("identity").build()).getReady());
        assertTrue(client.modelReady(ModelReadyRequest.newBuilder().setName("identity").setVersion("1").build()).getReady());
        assertFalse(client.modelReady(ModelReadyRequest.newBuilder().setName("spare").build()).getReady());
        ModelMetadataResponse md = client.modelMetadata(ModelMetadataRequest.newBuilder().setName("identity").build());
        assertEquals("identity", md.getName());
        assertEquals(List.of("1"), md.getVersionsList());
        assertEquals("FP32", md.getInputs(0).getDatatype());
        assertEquals(List.of(-1L), md.getInputs(0).getShapeList());
        ModelConfigResponse cfg = client.modelConfig(ModelConfigRequest.newBuilder().setName("repeat").build());
        assertEquals("repeat", cfg.getConfig().getName());
        assertTrue(cfg.getConfig().getModelTransactionPolicy().getDecoupled());
        assertEquals(io.backplane.protocol.inference.DataType.TYPE_INT64, cfg.getConfig().getInput(0).getDataType());
        io.backplane.protocol.inference.ModelRateLimiter rl = cfg.getConfig().getInstanceGroup(0).getRateLimiter();
        assertEquals(3, rl.getPriority());
        assertEquals("R1", rl.getResources(0).getName());
        assertTrue(rl.getResources(0).getGlobal());
        assertEquals(2, rl.getResources(0).getCount());
        assertEquals(Status.Code.NOT_FOUND, code(() -> client.modelMetadata(ModelMetadataRequest.newBuilder().setName("nope").build())));
        assertEquals(Status.Code.NOT_FOUND, code(() -> client.modelConfig(ModelConfigRequest.newBuilder().setName("nope").build())));
        assertEquals(Status.Code.INVALID_ARGUMENT, code(() -> client.modelMetadata(ModelMetadataRequest.newBuilder().setName("identity").setVersion("x").build())));
    }

    @Test
    void modelInfer_rawContents_roundTrip() {
        ModelInferResponse r = client.modelInfer(fp32("identity", 1f, -2.5f, Float.NaN));
        assertEquals("identity", r.getModelName());
        assertEquals("1", r.getModelVersion());
        assertEquals("id-3", r.getId());
        assertEquals("OUT0", r.getOutputs(0).getName());
        assertEquals("FP32", r.getOutputs(0).getDatatype());
        assertEquals(List.of(3L), r.getOutputs(0).getShapeList());
        assertArrayEquals(new float[] {1f, -2.5f, Float.NaN}, floats(r.getRawOutputContents(0)));
    }

    @Test
    void modelInfer_typedContents_everyDatatype() {
        ModelInferRequest.Builder b = ModelInferRequest.newBuilder().setModelName("all_types");
        for (DataType t : DataType.values()) {
            InferTensorContents.Builder c = InferTensorContents.newBuilder();
            switch (t) {
                case BOOL -> c.addBoolContents(true).addBoolContents(false);
                case INT8, INT16, INT32 -> c.addIntContents(-5).addIntContents(7);
                case INT64 -> c.addInt64Contents(Long.MIN_VALUE).addInt64Contents(3);
                case UINT8, UINT16, UINT32 -> c.addUintContents(0).addUintContents(200);
                case UINT64 -> c.addUint64Contents(-1L).addUint64Contents(9);
                case FP16, BF16, FP32 -> c.addFp32Contents(1.5f).addFp32Contents(-2f);
                case FP64 -> c.addFp64Contents(1e-300).addFp64Contents(2.5);
                case BYTES -> c.addBytesContents(ByteString.copyFromUtf8("héllo")).addBytesContents(ByteString.EMPTY);
            }
            b.addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("IN_" + t).setDatatype(t.name()).addShape(2).setContents(c));
        }
        ModelInferResponse r = client.modelInfer(b.build());
        assertEquals(DataType.values().length, r.getOutputsCount());
        assertEquals(r.getOutputsCount(), r.getRawOutputContentsCount());
        for (int i = 0; i < r.getOutputsCount(); i++) {
            DataType t = DataType.valueOf(r.getOutputs(i).getDatatype());
            ByteBuffer raw = r.getRawOutputContents(i).asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
            switch (t) {
                case BOOL -> assertEquals(1, raw.get(0));
                case INT8 -> assertEquals(-5, raw.get(0));
                case INT16 -> assertEquals(-5, raw.getShort(0));
                case INT32 -> assertEquals(-5, raw.getInt(0));
                case INT64 -> assertEquals(Long.MIN_VALUE, raw.getLong(0));
                case UINT8 -> assertEquals(200, raw.get(1) & 0xFF);
                case UINT16 -> assertEquals(200, raw.getShort(2) & 0xFFFF);
                case UINT32 -> assertEquals(200, raw.getInt(4));
                case UINT64 -> assertEquals(-1L, raw.getLong(0));
                case FP16 -> assertEquals(1.5f, Float.float16ToFloat(raw.getShort(0)));
                case BF16 -> assertEquals(-2f, Float.intBitsToFloat((raw.getShort(2) & 0xFFFF) << 16));
                case FP32 -> assertEquals(1.5f, raw.getFloat(0));
                case FP64 -> assertEquals(2.5, raw.getDouble(8));
                case BYTES -> {
                    assertEquals(6, raw.getInt(0));
                    assertEquals(4 + 6 + 4, raw.remaining());
                }
            }
        }
    }

    @Test
    void modelInfer_errors_mapToStatusCodes_andServerKeepsServing() {
        assertEquals(Status.Code.NOT_FOUND, code(() -> client.modelInfer(fp32("nope", 1f))));
        ModelInferRequest wrongShape = fp32("identity", 1f, 2f).toBuilder()
                .setInputs(0, ModelInferRequest.InferInputTensor.newBuilder().setName("IN0").setDatatype("FP32").addShape(3)).build();
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> client.modelInfer(wrongShape));
        assertEquals(Status.Code.INVALID_ARGUMENT, e.getStatus().getCode());
        assertTrue(e.getStatus().getDescription().contains("IN0"), e.getStatus().toString());
        ModelInferRequest wrongType = fp32("identity", 1f).toBuilder()
                .setInputs(0, ModelInferRequest.InferInputTensor.newBuilder().setName("IN0").setDatatype("INT32").addShape(1)).build();
        assertEquals(Status.Code.INVALID_ARGUMENT, code(() -> client.modelInfer(wrongType)));
        ModelInferRequest badType = fp32("identity", 1f).toBuilder()
                .setInputs(0, ModelInferRequest.InferInputTensor.newBuilder().setName("IN0").setDatatype("FP33").addShape(1)).build();
        assertEquals(Status.Code.INVALID_ARGUMENT, code(() -> client.modelInfer(badType)));
        ModelInferRequest typedMismatch = ModelInferRequest.newBuilder().setModelName("identity").addInputs(ModelInferRequest.InferInputTensor
                .newBuilder().setName("IN0").setDatatype("FP32").addShape(2).setContents(InferTensorContents.newBuilder().addIntContents(1))).build();
        assertEquals(Status.Code.INVALID_ARGUMENT, code(() -> client.modelInfer(typedMismatch)));
        ModelInferRequest rawCount = fp32("identity", 1f).toBuilder().addRawInputContents(ByteString.EMPTY).build();
        assertEquals(Status.Code.INVALID_ARGUMENT, code(() -> client.modelInfer(rawCount)));
        assertEquals(Status.Code.INTERNAL, code(() -> client.modelInfer(fp32("fail", 1f))));
        assertEquals(Status.Code.INVALID_ARGUMENT, code(() -> client.modelInfer(ModelInferRequest.newBuilder().setModelName("repeat")
                .addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("IN").setDatatype("INT64").addShape(1)
                        .setContents(InferTensorContents.newBuilder().addInt64Contents(1))).build())));
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, code(() -> client.modelInfer(fp32("identity", new float[20_000]))));
        assertStillServes();
    }

    /**
     * Triton's {@code grpc_explicit_int_content_client.py}: typed {@code int_contents} for both inputs
     * serve; adding one {@code raw_input_contents} entry while INPUT0 keeps its contents is refused with
     * Triton's words, before the raw entries are counted against the inputs.
     */
    @Test
    void modelInfer_contentsBesideRawInputContents_invalidArgumentAsTritonWordsIt() {
        InferTensorContents.Builder sixteen = InferTensorContents.newBuilder();
        for (int i = 0; i < 16; i++) {
            sixteen.addIntContents(i);
        }
        ModelInferRequest typed = ModelInferRequest.newBuilder().setModelName("simple")
                .addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("INPUT0").setDatatype("INT32").addShape(1).addShape(16).setContents(sixteen))
                .addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("INPUT1").setDatatype("INT32").addShape(1).addShape(16).setContents(sixteen))
                .addOutputs(ModelInferRequest.InferRequestedOutputTensor.newBuilder().setName("OUTPUT0"))
                .addOutputs(ModelInferRequest.InferRequestedOutputTensor.newBuilder().setName("OUTPUT1")).build();
        ModelInferResponse ok = client.modelInfer(typed);
        assertEquals(15, ok.getRawOutputContents(0).asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN).getInt(60));

        ModelInferRequest both = typed.toBuilder().addRawInputContents(ByteString.copyFrom(new byte[32])).build();
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> client.modelInfer(both));
        assertEquals(Status.Code.INVALID_ARGUMENT, e.getStatus().getCode());
        assertEquals("contents field must not be specified when using raw_input_contents for 'INPUT0' for model 'simple'",
                e.getStatus().getDescription());

        ModelInferRequest second = fp32("identity", 1f, 2f).toBuilder().setInputs(0, fp32("identity", 1f, 2f).getInputs(0).toBuilder()
                .setContents(InferTensorContents.newBuilder().addFp32Contents(1f).addFp32Contents(2f))).build();
        e = assertThrows(StatusRuntimeException.class, () -> client.modelInfer(second));
        assertEquals(Status.Code.INVALID_ARGUMENT, e.getStatus().getCode());
        assertEquals("contents field must not be specified when using raw_input_contents for 'IN0' for model 'identity'",
                e.getStatus().getDescription());
        assertStillServes();
    }

    @Test
    void modelStreamInfer_decoupled_streamsEveryResponse_andErrorsInBand() throws Exception {
        List<ModelStreamInferResponse> got = Collections.synchronizedList(new ArrayList<>());
        CompletableFuture<Void> done = new CompletableFuture<>();
        StreamObserver<ModelInferRequest> requests = async.modelStreamInfer(new StreamObserver<>() {
            @Override
            public void onNext(ModelStreamInferResponse r) {
                got.add(r);
            }

            @Override
            public void onError(Throwable t) {
                done.completeExceptionally(t);
            }

            @Override
            public void onCompleted() {
                done.complete(null);
            }
        });
        for (long n : new long[] {3, 2}) {
            requests.onNext(ModelInferRequest.newBuilder().setModelName("repeat").setId("r" + n)
                    .putParameters("triton_enable_empty_final_response", InferParameter.newBuilder().setBoolParam(true).build())
                    .addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("IN").setDatatype("INT64").addShape(1)
                            .setContents(InferTensorContents.newBuilder().addInt64Contents(n))).build());
        }
        requests.onNext(fp32("nope", 1f));
        requests.onNext(fp32("identity", 9f));
        requests.onCompleted();
        done.get(30, TimeUnit.SECONDS);
        long r3 = got.stream().filter(r -> r.getInferResponse().getId().equals("r3") && r.getInferResponse().getRawOutputContentsCount() == 1).count();
        long r2 = got.stream().filter(r -> r.getInferResponse().getId().equals("r2") && r.getInferResponse().getRawOutputContentsCount() == 1).count();
        long emptyFinals = got.stream().filter(r -> r.getInferResponse().getParametersMap().containsKey("triton_final_response")
                && r.getInferResponse().getParametersMap().get("triton_final_response").getBoolParam()
                && r.getInferResponse().getRawOutputContentsCount() == 0 && r.getErrorMessage().isEmpty()).count();
        assertEquals(3, r3, got.toString());
        assertEquals(2, r2, got.toString());
        assertEquals(2, emptyFinals, got.toString());
        assertTrue(got.stream().anyMatch(r -> r.getErrorMessage().contains("nope")), got.toString());
        assertTrue(got.stream().anyMatch(r -> r.getInferResponse().getModelName().equals("identity")
                && r.getInferResponse().getRawOutputContentsCount() == 1), got.toString());
    }

    @Test
    void repository_indexLoadUnload_whileRequestsRun() throws Exception {
        RepositoryIndexResponse idx = client.repositoryIndex(RepositoryIndexRequest.getDefaultInstance());
        assertTrue(idx.getModelsList().stream().anyMatch(m -> m.getName().equals("spare")), idx.toString());
        RepositoryIndexResponse ready = client.repositoryIndex(RepositoryIndexRequest.newBuilder().setReady(true).build());
        assertTrue(ready.getModelsList().stream().noneMatch(m -> m.getName().equals("spare")), ready.toString());
        client.repositoryModelLoad(RepositoryModelLoadRequest.newBuilder().setModelName("spare").build());
        assertTrue(client.modelReady(ModelReadyRequest.newBuilder().setName("spare").build()).getReady());

        backend.delayMillis = 300;
        int n = 4;
        CountDownLatch ended = new CountDownLatch(n);
        List<Object> outcomes = Collections.synchronizedList(new ArrayList<>());
        for (int i = 0; i < n; i++) {
            async.modelInfer(fp32("slow", i), new StreamObserver<>() {
                @Override
                public void onNext(ModelInferResponse value) {
                    outcomes.add(Status.Code.OK);
                }

                @Override
                public void onError(Throwable t) {
                    outcomes.add(Status.fromThrowable(t).getCode());
                    ended.countDown();
                }

                @Override
                public void onCompleted() {
                    ended.countDown();
                }
            });
        }
        Thread.sleep(100);
        client.repositoryModelUnload(RepositoryModelUnloadRequest.newBuilder().setModelName("slow").build());
        assertTrue(ended.await(30, TimeUnit.SECONDS));
        for (Object o : outcomes) {
            assertTrue(o == Status.Code.OK || o == Status.Code.UNAVAILABLE, outcomes.toString());
        }
        Status.Code after = code(() -> client.modelInfer(fp32("slow", 1f)));
        assertTrue(after == Status.Code.NOT_FOUND || after == Status.Code.UNAVAILABLE, after.toString());
        client.repositoryModelLoad(RepositoryModelLoadRequest.newBuilder().setModelName("slow").build());
        assertEquals(1, client.modelInfer(fp32("slow", 1f)).getRawOutputContentsCount());
        assertEquals(Status.Code.NOT_FOUND, code(() -> client.repositoryModelLoad(RepositoryModelLoadRequest.newBuilder().setModelName("nope").build())));
    }

    @Test
    void readiness_instancesDown_notReady_thenRecovers() {
        backend.ready = false;
        assertFalse(client.serverReady(ServerReadyRequest.getDefaultInstance()).getReady());
        assertFalse(client.modelReady(ModelReadyRequest.newBuilder().setName("identity").build()).getReady());
        assertTrue(client.serverLive(ServerLiveRequest.getDefaultInstance()).getLive());
        backend.ready = true;
        assertTrue(client.serverReady(ServerReadyRequest.getDefaultInstance()).getReady());
    }

    @Test
    void extensionsNotServed_answerUnimplemented_andTheServerStillServes() {
        assertEquals(Status.Code.UNIMPLEMENTED, code(() -> client.cudaSharedMemoryRegister(CudaSharedMemoryRegisterRequest.getDefaultInstance())));
        assertEquals(Status.Code.UNIMPLEMENTED, code(() -> client.traceSetting(TraceSettingRequest.getDefaultInstance())));
        assertEquals(Status.Code.UNIMPLEMENTED, code(() -> client.logSettings(LogSettingsRequest.getDefaultInstance())));
        assertTrue(client.serverLive(ServerLiveRequest.getDefaultInstance()).getLive());
    }

    @Test
    void modelStatistics_afterInfers_countsSuccessFailureAndExecutions() {
        client.modelInfer(fp32("identity", 1f, 2f));
        client.modelInfer(fp32("identity", 3f));
        assertEquals(Status.Code.INTERNAL, code(() -> client.modelInfer(fp32("fail", 1f))));
        var all = client.modelStatistics(ModelStatisticsRequest.getDefaultInstance());
        assertTrue(all.getModelStatsList().stream().anyMatch(m -> m.getName().equals("repeat")), all.toString());
        var id = client.modelStatistics(ModelStatisticsRequest.newBuilder().setName("identity").build()).getModelStats(0);
        assertEquals("1", id.getVersion());
        assertEquals(2, id.getInferenceStats().getSuccess().getCount());
        assertEquals(2, id.getInferenceStats().getQueue().getCount());
        assertEquals(2, id.getInferenceStats().getComputeInfer().getCount());
        assertTrue(id.getInferenceStats().getSuccess().getNs() > 0);
        assertEquals(2, id.getExecutionCount());
        assertTrue(id.getLastInference() > 0);
        var fail = client.modelStatistics(ModelStatisticsRequest.newBuilder().setName("fail").setVersion("1").build()).getModelStats(0);
        assertEquals(1, fail.getInferenceStats().getFail().getCount());
        assertEquals(0, fail.getInferenceStats().getSuccess().getCount());
        assertEquals(Status.Code.NOT_FOUND, code(() -> client.modelStatistics(ModelStatisticsRequest.newBuilder().setName("nope").build())));
        assertEquals(Status.Code.NOT_FOUND, code(() -> client.modelStatistics(ModelStatisticsRequest.newBuilder().setName("spare").build())));
    }

    @Test
    void serverMetadata_listsTheSameExtensionsAsRest() {
        ServerMetadataResponse md = client.serverMetadata(ServerMetadataRequest.getDefaultInstance());
        assertEquals(io.backplane.protocol.Extensions.SERVED, md.getExtensionsList());
        assertTrue(md.getExtensionsList().contains("statistics"));
    }

    @Test
    void serviceLoader_findsGrpcFactory() {
        List<String> names = java.util.ServiceLoader.load(io.backplane.spi.host.FrontendFactory.class).stream().map(p -> p.get().name()).toList();
        assertTrue(names.contains("grpc"), names.toString());
        assertTrue(frontend.endpoint().endsWith(":" + port));
    }
}
