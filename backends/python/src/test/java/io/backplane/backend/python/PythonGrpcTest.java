package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.InferParameter;
import io.backplane.protocol.inference.ModelConfigRequest;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelInferResponse;
import io.backplane.protocol.inference.ModelStreamInferResponse;
import io.backplane.spi.host.Frontend;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The python models of {@link PythonApiTest} as a gRPC client sees them, over the real gRPC
 * frontend on an ephemeral loopback port: response parameters of plain and decoupled responses,
 * the auto-completed config and Triton's error texts.
 */
class PythonGrpcTest {
    @TempDir
    Path temp;

    @AfterEach
    void nothingLeft() throws Exception {
        PythonApiTest.assertNothingLeft();
    }

    private static ModelInferRequest int32(String model, String input, int value) {
        ByteBuffer b = ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(value);
        return ModelInferRequest.newBuilder().setModelName(model)
                .addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName(input).setDatatype("INT32").addShape(1))
                .addRawInputContents(ByteString.copyFrom(b.array())).build();
    }

    @Test
    void grpc_parametersConfigAndErrors_asTritonClientsSeeThem() throws Exception {
        PythonApiTest.python();
        PythonApiTest api = new PythonApiTest();
        api.temp = temp;
        Path repo = api.repository("sender", "stream_async", "completed");
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).modelControlMode(ModelControlMode.NONE)
                .backendOption("python", StubSettings.INTERPRETER, PythonApiTest.PYTHON).build();
                Frontend f = host.frontendFactories().get("grpc").create(TestFrontends.context(host, Map.of("host", "127.0.0.1", "port", "0")))) {
            f.start();
            URI endpoint = URI.create(f.endpoint().contains("://") ? f.endpoint() : "grpc://" + f.endpoint());
            ManagedChannel channel = Grpc.newChannelBuilderForAddress(endpoint.getHost(), endpoint.getPort(), InsecureChannelCredentials.create()).build();
            try {
                var client = GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(60, TimeUnit.SECONDS);
                var async = GRPCInferenceServiceGrpc.newStub(channel).withDeadlineAfter(60, TimeUnit.SECONDS);

                ModelInferResponse r = client.modelInfer(int32("sender", "MODE", PythonApiTest.PARAMETERS));
                Map<String, InferParameter> p = r.getParametersMap();
                assertEquals("ten", p.get("text").getStringParam(), r.toString());
                assertEquals(10, p.get("count").getInt64Param());
                assertTrue(p.get("flag").getBoolParam());
                assertTrue(!p.containsKey("ratio") && p.size() == 3, "bool/int/str only, as Triton: " + p);

                StatusRuntimeException e = assertThrows(StatusRuntimeException.class,
                        () -> client.modelInfer(int32("sender", "MODE", PythonApiTest.FINAL_ONLY)));
                assertEquals(Status.Code.INTERNAL, e.getStatus().getCode());
                assertTrue(e.getStatus().getDescription().contains("Non-decoupled model cannot send complete final before sending a response"),
                        e.getStatus().getDescription());

                LinkedBlockingQueue<ModelStreamInferResponse> streamed = new LinkedBlockingQueue<>();
                CompletableFuture<Void> closed = new CompletableFuture<>();
                StreamObserver<ModelInferRequest> requests = async.modelStreamInfer(new StreamObserver<>() {
                    @Override
                    public void onNext(ModelStreamInferResponse value) {
                        streamed.add(value);
                    }

                    @Override
                    public void onError(Throwable t) {
                        closed.completeExceptionally(t);
                    }

                    @Override
                    public void onCompleted() {
                        closed.complete(null);
                    }
                });
                requests.onNext(int32("stream_async", "WAIT", 0));
                ModelStreamInferResponse s = streamed.poll(60, TimeUnit.SECONDS);
                assertTrue(s != null && s.getErrorMessage().isEmpty(), String.valueOf(s));
                assertTrue(s.getInferResponse().getParametersMap().get("released").getBoolParam(), s.toString());
                requests.onCompleted();
                closed.get(60, TimeUnit.SECONDS);

                var config = client.modelConfig(ModelConfigRequest.newBuilder().setName("completed").build()).getConfig();
                assertEquals(8, config.getMaxBatchSize());
                assertEquals("INPUT1", config.getInput(1).getName());
                assertTrue(config.getInput(1).getOptional());
            } finally {
                channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            }
        }
    }
}
