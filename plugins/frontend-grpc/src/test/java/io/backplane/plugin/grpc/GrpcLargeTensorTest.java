package io.backplane.plugin.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.google.protobuf.ByteString;
import io.backplane.core.BackplaneHost;
import io.backplane.plugin.http.TestBackend;
import io.backplane.plugin.http.TestSupport;
import io.backplane.protocol.AliasingMarshaller;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelInferResponse;
import io.backplane.spi.DataType;
import io.grpc.CallOptions;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.ClientCalls;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Tensors larger than grpc-java's 1 MiB flow-control window and its 4 MiB streaming-parse
 * threshold, through the real server: the server parses them with {@link AliasingMarshaller} (raw
 * contents are views of one array per message) and its 16 MiB window; the answers must be the
 * sent bytes, exactly, for the generated client's marshaller and for the aliasing one, one at a
 * time and several at once on one connection.
 */
class GrpcLargeTensorTest {
    static final int FLOATS = 3 * 708 * 708; // 6,015,168 bytes

    BackplaneHost host;
    GrpcFrontend frontend;
    ManagedChannel channel;

    @BeforeEach
    void start() throws Exception {
        host = BackplaneHost.builder().backend(new TestBackend()).unloadTimeout(Duration.ofSeconds(5))
                .model(TestBackend.identity("identity", DataType.FP32)).loadModel("identity").build();
        frontend = (GrpcFrontend) new GrpcFrontendFactory().create(TestSupport.context(host, Map.of("host", "127.0.0.1", "port", "0")));
        frontend.start();
        channel = NettyChannelBuilder.forAddress("127.0.0.1", frontend.port(), InsecureChannelCredentials.create())
                .maxInboundMessageSize(64 << 20).build();
    }

    @AfterEach
    void stop() throws Exception {
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        int port = frontend.port();
        frontend.close();
        host.close();
        TestSupport.assertPortClosed(port);
        TestSupport.assertNoBackplaneThreads();
    }

    static ModelInferRequest request(int seed) {
        ByteBuffer b = ByteBuffer.allocate(FLOATS * 4).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < FLOATS; i++) {
            b.putFloat(i * 0.5f + seed);
        }
        return ModelInferRequest.newBuilder().setModelName("identity").setId("r" + seed)
                .addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("IN0").setDatatype("FP32").addShape(FLOATS))
                .addRawInputContents(ByteString.copyFrom(b.array())).build();
    }

    @Test
    void sixMegabytes_generatedAndAliasingClients_sameBytesBack() {
        ModelInferRequest one = request(1);
        ModelInferResponse plain = GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(60, TimeUnit.SECONDS).modelInfer(one);
        assertEquals(one.getRawInputContents(0), plain.getRawOutputContents(0));
        ModelInferResponse aliased = ClientCalls.blockingUnaryCall(channel, AliasingMarshaller.of(GRPCInferenceServiceGrpc.getModelInferMethod()),
                CallOptions.DEFAULT.withDeadlineAfter(60, TimeUnit.SECONDS), one);
        assertEquals(plain, aliased);
    }

    @Test
    void sixMegabytes_fourAtOnceOnOneConnection_eachGetsItsOwnBytes() {
        GRPCInferenceServiceGrpc.GRPCInferenceServiceFutureStub stub = GRPCInferenceServiceGrpc.newFutureStub(channel)
                .withDeadlineAfter(60, TimeUnit.SECONDS);
        List<ModelInferRequest> sent = new ArrayList<>();
        List<CompletableFuture<ModelInferResponse>> answers = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            ModelInferRequest r = request(10 + i);
            sent.add(r);
            var f = stub.modelInfer(r);
            CompletableFuture<ModelInferResponse> c = new CompletableFuture<>();
            f.addListener(() -> {
                try {
                    c.complete(f.get());
                } catch (Exception e) {
                    c.completeExceptionally(e);
                }
            }, Runnable::run);
            answers.add(c);
        }
        for (int i = 0; i < 4; i++) {
            ModelInferResponse r = answers.get(i).join();
            assertEquals(sent.get(i).getId(), r.getId());
            assertEquals(sent.get(i).getRawInputContents(0), r.getRawOutputContents(0));
        }
    }
}
