package io.backplane.plugin.grpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.plugin.http.HttpFrontendFactory;
import io.backplane.plugin.http.TestBackend;
import io.backplane.plugin.http.TestSupport;
import io.backplane.protocol.SystemSharedMemory;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelInferResponse;
import io.backplane.protocol.inference.SystemSharedMemoryStatusRequest;
import io.backplane.protocol.inference.SystemSharedMemoryStatusResponse;
import io.backplane.spi.DataType;
import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.FrontendContext;
import io.backplane.spi.host.InferenceService;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * One system shared-memory registry for a host's REST and gRPC frontends, as Triton has, through
 * {@link FrontendContext#shared}: a region registered over REST is seen and used over gRPC.
 */
class SharedRegistryTest {
    /** A host's context that shares objects between its frontends, as {@code backplane serve} does. */
    record SharingContext(InferenceService service, Map<String, String> options, Map<Class<?>, AutoCloseable> objects) implements FrontendContext {
        @Override
        public <T extends AutoCloseable> Shared<T> shared(Class<T> type, Supplier<T> create) {
            return new Shared<>(type.cast(objects.computeIfAbsent(type, t -> create.get())), false);
        }
    }

    @Test
    void regionRegisteredOverRest_seenAndUsedOverGrpc() throws Exception {
        String key = "/backplane-shared-test-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
        Path file = Path.of("/dev/shm", key.substring(1));
        ByteBuffer in = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putFloat(4).putFloat(5);
        byte[] content = new byte[1024];
        System.arraycopy(in.array(), 0, content, 0, 8);
        Files.write(file, content);
        Map<Class<?>, AutoCloseable> objects = new ConcurrentHashMap<>();
        Map<String, String> options = Map.of("host", "127.0.0.1", "port", "0");
        try (BackplaneHost host = BackplaneHost.builder().backend(new TestBackend()).model(TestBackend.identity("identity", DataType.FP32))
                .loadModel("identity").build();
                HttpClient rest = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build()) {
            Frontend http = new HttpFrontendFactory().create(new SharingContext(host, options, objects));
            GrpcFrontend grpc = (GrpcFrontend) new GrpcFrontendFactory().create(new SharingContext(host, options, objects));
            ManagedChannel channel = null;
            try {
                http.start();
                grpc.start();
                String base = "http://" + http.endpoint().replaceFirst("^[a-z]+://", "");
                HttpResponse<String> reg = rest.send(HttpRequest.newBuilder(URI.create(base + "/v2/systemsharedmemory/region/io/register"))
                        .POST(HttpRequest.BodyPublishers.ofString("{\"key\":\"" + key + "\",\"offset\":0,\"byte_size\":1024}")).build(),
                        HttpResponse.BodyHandlers.ofString());
                assertEquals(200, reg.statusCode(), reg.body());
                assertEquals(1, objects.size(), "one registry for both frontends");

                channel = Grpc.newChannelBuilderForAddress("127.0.0.1", grpc.port(), InsecureChannelCredentials.create()).build();
                var client = GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(30, TimeUnit.SECONDS);
                SystemSharedMemoryStatusResponse st = client.systemSharedMemoryStatus(SystemSharedMemoryStatusRequest.getDefaultInstance());
                assertEquals(key, st.getRegionsOrThrow("io").getKey());
                ModelInferResponse r = client.modelInfer(ModelInferRequest.newBuilder().setModelName("identity")
                        .addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("IN0").setDatatype("FP32").addShape(2)
                                .putAllParameters(GrpcSharedMemoryTest.shm("io", 0, 8)))
                        .build());
                assertArrayEquals(new float[] {4f, 5f}, GrpcFrontendTest.floats(r.getRawOutputContents(0)));
            } finally {
                if (channel != null) {
                    channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
                }
                grpc.close();
                http.close();
                // The host owns the shared registry: it is still there after its frontends closed, until the host closes it.
                SystemSharedMemory shm = (SystemSharedMemory) objects.get(SystemSharedMemory.class);
                assertTrue(shm.status(null).stream().anyMatch(s -> s.name().equals("io")), "frontends do not close what they share");
                shm.close();
                assertEquals(0, shm.status(null).size());
                Files.deleteIfExists(file);
            }
        }
        TestSupport.assertNoBackplaneThreads();
    }
}
