package io.backplane.plugin.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import io.backplane.core.BackplaneHost;
import io.backplane.plugin.http.TestBackend;
import io.backplane.plugin.http.TestSupport;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelInferResponse;
import io.backplane.spi.DataType;
import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.FrontendFactory;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A local client passes a 64 MiB FP32 tensor through the identity model three ways in one run —
 * system shared memory (REST control, tensor by reference both ways), binary-tensor HTTP, gRPC raw
 * contents — checks every answer and logs the median round trip of each (a report, never an
 * assertion). Run alone for the figures:
 * {@code ./mvnw -q -B -pl plugins/frontend-grpc -am verify -Dtest=SharedMemoryRoundTripTest -Dsurefire.failIfNoSpecifiedTests=false
 * -Dbackplane.bench.rounds=5}.
 */
class SharedMemoryRoundTripTest {
    private static final Logger log = LoggerFactory.getLogger(SharedMemoryRoundTripTest.class);
    static final int BYTES = 64 << 20;
    /** One round in the suite (correctness); {@code -Dbackplane.bench.rounds=5} for figures. */
    static final int ROUNDS = Integer.getInteger("backplane.bench.rounds", 1);

    BackplaneHost host;
    Frontend http;
    Frontend grpc;
    Path file;
    String key;

    static Frontend start(String name, BackplaneHost host, Map<String, String> options) throws Exception {
        FrontendFactory f = ServiceLoader.load(FrontendFactory.class).stream().map(ServiceLoader.Provider::get)
                .filter(p -> p.name().equals(name)).findFirst().orElseThrow();
        Frontend fe = f.create(TestSupport.context(host, options));
        fe.start();
        return fe;
    }

    static int port(Frontend f) {
        String e = f.endpoint();
        return Integer.parseInt(e.substring(e.lastIndexOf(':') + 1).replaceAll("[^0-9]", ""));
    }

    @BeforeEach
    void start() throws Exception {
        key = "/backplane-test-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
        file = Path.of("/dev/shm", key.substring(1));
        host = BackplaneHost.builder().backend(new TestBackend()).model(TestBackend.identity("identity", DataType.FP32))
                .loadModel("identity").build();
        http = start("http", host, Map.of("host", "127.0.0.1", "port", "0", "max_body_bytes", Integer.toString(3 * BYTES)));
        grpc = start("grpc", host, Map.of("host", "127.0.0.1", "port", "0", "max_message_bytes", Integer.toString(3 * BYTES)));
    }

    @AfterEach
    void stop() throws Exception {
        grpc.close();
        http.close();
        host.close();
        Files.deleteIfExists(file);
        TestSupport.assertNoBackplaneThreads();
    }

    @Test
    void roundTrip_64MiBTensor_sharedMemoryBinaryHttpAndGrpcAllReturnTheTensor() throws Exception {
        byte[] tensor = new byte[BYTES];
        for (int i = 0; i < BYTES; i += 4) {
            tensor[i] = (byte) (i >>> 2);
        }
        String base = "http://127.0.0.1:" + port(http);
        long[] shmNanos = new long[ROUNDS];
        long[] httpNanos = new long[ROUNDS];
        long[] grpcNanos = new long[ROUNDS];
        try (HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
                Arena arena = Arena.ofConfined()) {
            MemorySegment region;
            try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE_NEW, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
                region = ch.map(FileChannel.MapMode.READ_WRITE, 0, 2L * BYTES, arena);
            }
            HttpResponse<String> reg = client.send(HttpRequest.newBuilder(URI.create(base + "/v2/systemsharedmemory/region/io/register"))
                    .POST(HttpRequest.BodyPublishers.ofString("{\"key\":\"" + key + "\",\"offset\":0,\"byte_size\":" + 2L * BYTES + "}")).build(),
                    HttpResponse.BodyHandlers.ofString());
            assertEquals(200, reg.statusCode(), reg.body());
            String shmBody = "{\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"FP32\",\"shape\":[" + BYTES / 4 + "],\"parameters\":"
                    + "{\"shared_memory_region\":\"io\",\"shared_memory_byte_size\":" + BYTES + "}}],\"outputs\":[{\"name\":\"OUT0\",\"parameters\":"
                    + "{\"shared_memory_region\":\"io\",\"shared_memory_offset\":" + BYTES + ",\"shared_memory_byte_size\":" + BYTES + "}}]}";
            String binHeader = "{\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"FP32\",\"shape\":[" + BYTES / 4 + "],\"parameters\":"
                    + "{\"binary_data_size\":" + BYTES + "}}],\"outputs\":[{\"name\":\"OUT0\",\"parameters\":{\"binary_data\":true}}]}";
            byte[] head = binHeader.getBytes(StandardCharsets.UTF_8);
            ManagedChannel channel = Grpc.newChannelBuilderForAddress("127.0.0.1", port(grpc), InsecureChannelCredentials.create())
                    .maxInboundMessageSize(3 * BYTES).build();
            try {
                GRPCInferenceServiceGrpc.GRPCInferenceServiceBlockingStub stub = GRPCInferenceServiceGrpc.newBlockingStub(channel);
                ByteString raw = ByteString.copyFrom(tensor);
                for (int round = 0; round < ROUNDS; round++) {
                    long t0 = System.nanoTime();
                    MemorySegment.copy(MemorySegment.ofArray(tensor), 0, region, 0, BYTES);
                    HttpResponse<String> r = client.send(HttpRequest.newBuilder(URI.create(base + "/v2/models/identity/infer"))
                            .POST(HttpRequest.BodyPublishers.ofString(shmBody)).build(), HttpResponse.BodyHandlers.ofString());
                    byte[] out = region.asSlice(BYTES, BYTES).toArray(ValueLayout.JAVA_BYTE);
                    shmNanos[round] = System.nanoTime() - t0;
                    assertEquals(200, r.statusCode(), r.body());
                    assertTrue(Arrays.equals(tensor, out), "the output in shared memory differs from the input");
                    region.asSlice(BYTES, BYTES).fill((byte) 0);

                    t0 = System.nanoTime();
                    byte[] body = new byte[head.length + BYTES];
                    System.arraycopy(head, 0, body, 0, head.length);
                    System.arraycopy(tensor, 0, body, head.length, BYTES);
                    HttpResponse<byte[]> b = client.send(HttpRequest.newBuilder(URI.create(base + "/v2/models/identity/infer"))
                            .header("Inference-Header-Content-Length", Integer.toString(head.length))
                            .POST(HttpRequest.BodyPublishers.ofByteArray(body)).build(), HttpResponse.BodyHandlers.ofByteArray());
                    httpNanos[round] = System.nanoTime() - t0;
                    assertEquals(200, b.statusCode());
                    int jsonLength = Integer.parseInt(b.headers().firstValue("Inference-Header-Content-Length").orElseThrow());
                    assertTrue(Arrays.equals(tensor, 0, BYTES, b.body(), jsonLength, jsonLength + BYTES), "binary HTTP output differs");

                    t0 = System.nanoTime();
                    ModelInferResponse g = stub.withDeadlineAfter(60, TimeUnit.SECONDS).modelInfer(ModelInferRequest.newBuilder().setModelName("identity")
                            .addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("IN0").setDatatype("FP32").addShape(BYTES / 4))
                            .addRawInputContents(raw).build());
                    grpcNanos[round] = System.nanoTime() - t0;
                    assertEquals(raw, g.getRawOutputContents(0), "gRPC output differs");
                }
            } finally {
                channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            }
            HttpResponse<String> unreg = client.send(HttpRequest.newBuilder(URI.create(base + "/v2/systemsharedmemory/unregister"))
                    .POST(HttpRequest.BodyPublishers.noBody()).build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, unreg.statusCode(), unreg.body());
        }
        log.info("64 MiB FP32 identity round trip, median of {} (load average {}): system shared memory {} ms, binary HTTP {} ms, gRPC {} ms",
                ROUNDS, java.lang.management.ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage(),
                median(shmNanos), median(httpNanos), median(grpcNanos));
    }

    static double median(long[] nanos) {
        long[] s = nanos.clone();
        Arrays.sort(s);
        return s[s.length / 2] / 1e6;
    }
}
