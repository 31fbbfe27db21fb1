package io.backplane.plugin.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.plugin.http.TestBackend;
import io.backplane.plugin.http.TestSupport;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.InferTensorContents;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelReadyRequest;
import io.backplane.protocol.inference.ModelRepositoryParameter;
import io.backplane.protocol.inference.RepositoryIndexRequest;
import io.backplane.protocol.inference.RepositoryModelLoadRequest;
import io.backplane.protocol.inference.RepositoryModelUnloadRequest;
import io.backplane.protocol.inference.ServerMetadataRequest;
import io.backplane.protocol.inference.ServerReadyRequest;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.api.io.TempDir;

/**
 * Triton's model control over a real gRPC server and the generated Java client: load and unload
 * with Triton's parameters and status codes, readiness as the host reports it (strict), the
 * configured server name, and Triton's sentences for unknown models, bad names and out-of-range
 * typed contents.
 */
class GrpcModelControlTest {
    @TempDir
    Path repo;
    final TestBackend backend = new TestBackend();
    BackplaneHost host;
    GrpcFrontend grpc;
    ManagedChannel channel;
    GRPCInferenceServiceGrpc.GRPCInferenceServiceBlockingStub client;

    @BeforeEach
    void start() throws Exception {
        model("m", """
                backend: "testing"
                input [{ name: "IN0" data_type: TYPE_FP32 dims: [-1] }]
                output [{ name: "OUT0" data_type: TYPE_FP32 dims: [-1] }]
                """);
        model("ens", """
                platform: "ensemble"
                input [{ name: "IN0" data_type: TYPE_FP32 dims: [-1] }]
                output [{ name: "OUT0" data_type: TYPE_FP32 dims: [-1] }]
                ensemble_scheduling { step [ { model_name: "m" model_version: -1 input_map { key: "IN0" value: "IN0" }
                  output_map { key: "OUT0" value: "OUT0" } } ] }
                """);
        model("ints", """
                backend: "testing"
                input [{ name: "IN0" data_type: TYPE_INT8 dims: [-1] }, { name: "IN1" data_type: TYPE_UINT8 dims: [-1] },
                       { name: "IN2" data_type: TYPE_INT16 dims: [-1] }, { name: "IN3" data_type: TYPE_UINT16 dims: [-1] }]
                output [{ name: "OUT0" data_type: TYPE_INT8 dims: [-1] }, { name: "OUT1" data_type: TYPE_UINT8 dims: [-1] },
                        { name: "OUT2" data_type: TYPE_INT16 dims: [-1] }, { name: "OUT3" data_type: TYPE_UINT16 dims: [-1] }]
                """);
        host = BackplaneHost.builder().backend(backend).modelRepository(repo).modelControlMode(ModelControlMode.EXPLICIT)
                .serverName("triton").unloadTimeout(Duration.ofSeconds(5)).build();
        grpc = (GrpcFrontend) new GrpcFrontendFactory().create(TestSupport.context(host, Map.of("host", "127.0.0.1", "port", "0")));
        grpc.start();
        channel = Grpc.newChannelBuilderForAddress("127.0.0.1", grpc.port(), InsecureChannelCredentials.create()).build();
        client = GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(30, TimeUnit.SECONDS);
    }

    private void model(String name, String config) throws Exception {
        Path dir = Files.createDirectories(repo.resolve(name).resolve("1")).getParent();
        Files.writeString(dir.resolve("config.pbtxt"), config);
    }

    @AfterEach
    void stop() throws Exception {
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        grpc.close();
        host.close();
        TestSupport.assertNoBackplaneThreads();
    }

    private static StatusRuntimeException refused(Status.Code code, Executable call) {
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, call);
        assertEquals(code, e.getStatus().getCode(), e.getStatus().toString());
        return e;
    }

    private static String text(StatusRuntimeException e) {
        return String.valueOf(e.getStatus().getDescription());
    }

    private void load(String model) {
        client.repositoryModelLoad(RepositoryModelLoadRequest.newBuilder().setModelName(model).build());
    }

    private boolean ready(String model) {
        return client.modelReady(ModelReadyRequest.newBuilder().setName(model).build()).getReady();
    }

    private static ModelRepositoryParameter bool(boolean b) {
        return ModelRepositoryParameter.newBuilder().setBoolParam(b).build();
    }

    @Test
    void cudaSharedMemory_noGpuSupport_refusedWithTritonsSentence_serverKeepsServing() {
        StatusRuntimeException reg = refused(Status.Code.UNIMPLEMENTED, () -> client.cudaSharedMemoryRegister(
                io.backplane.protocol.inference.CudaSharedMemoryRegisterRequest.newBuilder().setName("gpu0").setDeviceId(0).setByteSize(64)
                        .setRawHandle(ByteString.copyFrom(new byte[64])).build()));
        assertTrue(text(reg).startsWith("failed to register CUDA shared memory region: 'gpu0', GPUs not supported; "), text(reg));
        assertTrue(text(reg).contains("use system shared memory"), text(reg));
        // Status and unregister answer as Triton built without GPUs: none registered, nothing to unregister
        // (tritonclient's system-shared-memory examples unregister every CUDA region first).
        assertEquals(0, client.cudaSharedMemoryStatus(io.backplane.protocol.inference.CudaSharedMemoryStatusRequest.getDefaultInstance())
                .getRegionsCount());
        client.cudaSharedMemoryUnregister(io.backplane.protocol.inference.CudaSharedMemoryUnregisterRequest.getDefaultInstance());
        client.cudaSharedMemoryUnregister(io.backplane.protocol.inference.CudaSharedMemoryUnregisterRequest.newBuilder().setName("gpu0").build());
        refused(Status.Code.NOT_FOUND, () -> client.cudaSharedMemoryStatus(
                io.backplane.protocol.inference.CudaSharedMemoryStatusRequest.newBuilder().setName("gpu0").build()));
        assertFalse(client.serverMetadata(ServerMetadataRequest.getDefaultInstance()).getExtensionsList().stream().anyMatch(e -> e.contains("cuda")),
                "the extension is not listed");
        load("m");
        assertTrue(ready("m"));
    }

    @Test
    void serverMetadata_reportsTheConfiguredName() {
        var md = client.serverMetadata(ServerMetadataRequest.getDefaultInstance());
        assertEquals("triton", md.getName());
        assertTrue(md.getExtensionsList().contains("model_repository(unload_dependents)"), md.getExtensionsList().toString());
    }

    @Test
    void unload_unloadDependents_unloadsTheComposingModel() {
        load("ens");
        assertTrue(ready("m"));
        client.repositoryModelUnload(RepositoryModelUnloadRequest.newBuilder().setModelName("ens").putParameters("unload_dependents", bool(false)).build());
        assertTrue(ready("m"), "unload_dependents false keeps the composing model");
        load("ens");
        client.repositoryModelUnload(RepositoryModelUnloadRequest.newBuilder().setModelName("ens").putParameters("unload_dependents", bool(true)).build());
        assertFalse(ready("ens"));
        assertFalse(ready("m"), "unload_dependents unloads the composing model loaded for the ensemble");
        assertTrue(client.repositoryIndex(RepositoryIndexRequest.newBuilder().setReady(true).build()).getModelsList().isEmpty());
    }

    @Test
    void repositoryCalls_badParameters_tritonCodesAndSentences() {
        StatusRuntimeException type = refused(Status.Code.INVALID_ARGUMENT, () -> client.repositoryModelUnload(RepositoryModelUnloadRequest
                .newBuilder().setModelName("m").putParameters("unload_dependents", ModelRepositoryParameter.newBuilder().setStringParam("yes").build())
                .build()));
        assertTrue(text(type).startsWith("invalid value type for 'unload_dependents' parameter, expected bool_param."), text(type));
        StatusRuntimeException unknownUnload = refused(Status.Code.UNIMPLEMENTED, () -> client.repositoryModelUnload(
                RepositoryModelUnloadRequest.newBuilder().setModelName("m").putParameters("force", bool(true)).build()));
        assertTrue(text(unknownUnload).contains("'force'"), text(unknownUnload));

        StatusRuntimeException configBytes = refused(Status.Code.INVALID_ARGUMENT, () -> client.repositoryModelLoad(RepositoryModelLoadRequest
                .newBuilder().setModelName("m").putParameters("config", ModelRepositoryParameter.newBuilder()
                        .setBytesParam(ByteString.copyFromUtf8("{}")).build()).build()));
        assertTrue(text(configBytes).startsWith("invalid value type for load parameter 'config', expected string_param."), text(configBytes));
        StatusRuntimeException fileString = refused(Status.Code.INVALID_ARGUMENT, () -> client.repositoryModelLoad(RepositoryModelLoadRequest
                .newBuilder().setModelName("m").putParameters("file:1/model.onnx", ModelRepositoryParameter.newBuilder().setStringParam("x").build())
                .build()));
        assertTrue(text(fileString).startsWith("invalid value type for load parameter 'file:1/model.onnx', expected bytes_param."), text(fileString));
        StatusRuntimeException unknownLoad = refused(Status.Code.INVALID_ARGUMENT, () -> client.repositoryModelLoad(RepositoryModelLoadRequest
                .newBuilder().setModelName("m").putParameters("weights", bool(true)).build()));
        assertTrue(text(unknownLoad).startsWith("unrecognized load parameter 'weights'."), text(unknownLoad));

        StatusRuntimeException badConfig = refused(Status.Code.INVALID_ARGUMENT, () -> client.repositoryModelLoad(RepositoryModelLoadRequest
                .newBuilder().setModelName("m").putParameters("config", ModelRepositoryParameter.newBuilder().setStringParam("{\"max_batch_size\": \"x\"}")
                        .build()).build()));
        assertTrue(text(badConfig).contains("'config'") && text(badConfig).contains("\"x\""), text(badConfig));

        StatusRuntimeException named = refused(Status.Code.UNIMPLEMENTED, () -> client.repositoryIndex(RepositoryIndexRequest.newBuilder()
                .setRepositoryName("other").build()));
        assertTrue(text(named).startsWith("'repository_name' specification is not supported"), text(named));
        refused(Status.Code.UNIMPLEMENTED, () -> client.repositoryModelLoad(RepositoryModelLoadRequest.newBuilder().setModelName("m")
                .setRepositoryName("other").build()));
        refused(Status.Code.UNIMPLEMENTED, () -> client.repositoryModelUnload(RepositoryModelUnloadRequest.newBuilder().setModelName("m")
                .setRepositoryName("other").build()));

        StatusRuntimeException traversal = refused(Status.Code.INVALID_ARGUMENT, () -> load("../m"));
        assertTrue(text(traversal).startsWith("invalid model name '../m', model name must not contain path traversal characters"), text(traversal));
        StatusRuntimeException empty = refused(Status.Code.INVALID_ARGUMENT, () -> load(""));
        assertTrue(text(empty).startsWith("model name must not be empty"), text(empty));
        StatusRuntimeException missing = refused(Status.Code.NOT_FOUND, () -> load("nope"));
        assertTrue(text(missing).startsWith("failed to load 'nope'"), text(missing));

        load("m");
        assertTrue(ready("m"), "the server keeps serving after the refusals");
    }

    @Test
    void readiness_isWhatTheHostReports_strict() {
        load("m");
        assertTrue(ready("m"));
        assertTrue(client.serverReady(ServerReadyRequest.getDefaultInstance()).getReady());
        backend.ready = false;
        assertFalse(ready("m"), "an instance that cannot serve makes the model not ready");
        assertFalse(client.serverReady(ServerReadyRequest.getDefaultInstance()).getReady(), "strict readiness: the server too");
        backend.ready = true;
        assertTrue(ready("m"));
        assertTrue(client.serverReady(ServerReadyRequest.getDefaultInstance()).getReady());
    }

    @Test
    void infer_unknownModel_tritonSentenceFirst() {
        load("m");
        ModelInferRequest req = ModelInferRequest.newBuilder().setModelName("nope").addInputs(ModelInferRequest.InferInputTensor.newBuilder()
                .setName("IN0").setDatatype("FP32").addShape(1).setContents(InferTensorContents.newBuilder().addFp32Contents(1f))).build();
        StatusRuntimeException e = refused(Status.Code.NOT_FOUND, () -> client.modelInfer(req));
        assertTrue(text(e).startsWith("Request for unknown model: 'nope' is not found"), text(e));
        StatusRuntimeException v = refused(Status.Code.NOT_FOUND, () -> client.modelInfer(req.toBuilder().setModelName("m").setModelVersion("4").build()));
        assertTrue(text(v).startsWith("Request for unknown model: 'm' version 4 is not found"), text(v));
        StatusRuntimeException notLoaded = refused(Status.Code.UNAVAILABLE, () -> client.modelInfer(req.toBuilder().setModelName("ens").build()));
        assertTrue(text(notLoaded).startsWith("Request for unknown model: 'ens' is not found"), text(notLoaded));
    }

    @Test
    void infer_typedIntContents_outOfRange_namesTheValue() {
        load("ints");
        record Case(String type, InferTensorContents contents, String value) {
        }
        List<Case> cases = List.of(new Case("INT8", InferTensorContents.newBuilder().addIntContents(1).addIntContents(300).build(), "300"),
                new Case("UINT8", InferTensorContents.newBuilder().addUintContents(1).addUintContents(256).build(), "256"),
                new Case("INT16", InferTensorContents.newBuilder().addIntContents(1).addIntContents(-40000).build(), "-40000"),
                new Case("UINT16", InferTensorContents.newBuilder().addUintContents(1).addUintContents(70000).build(), "70000"));
        for (int i = 0; i < cases.size(); i++) {
            ModelInferRequest.Builder b = ModelInferRequest.newBuilder().setModelName("ints");
            for (int k = 0; k < cases.size(); k++) {
                Case c = cases.get(k);
                InferTensorContents ok = c.type().startsWith("U") ? InferTensorContents.newBuilder().addUintContents(1).addUintContents(2).build()
                        : InferTensorContents.newBuilder().addIntContents(1).addIntContents(2).build();
                b.addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("IN" + k).setDatatype(c.type()).addShape(2)
                        .setContents(k == i ? c.contents() : ok));
            }
            StatusRuntimeException e = refused(Status.Code.INVALID_ARGUMENT, () -> client.modelInfer(b.build()));
            assertTrue(text(e).contains("input 'IN" + i + "'") && text(e).contains(cases.get(i).value()), text(e));
        }
    }
}
