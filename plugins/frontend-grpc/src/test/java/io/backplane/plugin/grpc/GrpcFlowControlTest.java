package io.backplane.plugin.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.plugin.http.TestBackend;
import io.backplane.plugin.http.TestSupport;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelStreamInferResponse;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.host.HostResponses;
import io.backplane.spi.host.InferenceService;
import io.backplane.spi.host.RequestHandle;
import io.backplane.spi.host.ResponseObserver;
import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * DESIGN P9, the gRPC frontend's part: a ModelStreamInfer observer's {@code ready()} turns not
 * ready while the client does not read (gRPC's outbound buffer fills), completes when the client
 * reads, and completes when the client cancels the call. The test plays the backend: it takes the
 * observer the frontend hands to the service and pushes 64 KiB responses into it.
 */
@Timeout(60)
class GrpcFlowControlTest {
    private static final int MAX_PUSHED = 1000;

    BackplaneHost host;
    GrpcFrontend frontend;
    ManagedChannel channel;
    final LinkedBlockingQueue<ResponseObserver> held = new LinkedBlockingQueue<>();
    final Handle handle = new Handle();

    @BeforeEach
    void start() throws Exception {
        host = BackplaneHost.builder().backend(new TestBackend()).unloadTimeout(Duration.ofSeconds(5)).model(TestBackend.repeat("repeat"))
                .loadModel("repeat").build();
        // The host as the frontend sees it, except that a stream to "repeat" is held by the test.
        InferenceService service = (InferenceService) Proxy.newProxyInstance(getClass().getClassLoader(), new Class<?>[] {InferenceService.class},
                (proxy, method, args) -> {
                    if (method.getName().equals("stream") && args[0] instanceof InferenceRequest r && r.modelName().equals("repeat")) {
                        held.add((ResponseObserver) args[1]);
                        return handle;
                    }
                    try {
                        return method.invoke(host, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
        frontend = (GrpcFrontend) new GrpcFrontendFactory().create(TestSupport.context(service, Map.of("host", "127.0.0.1", "port", "0")));
        frontend.start();
        channel = NettyChannelBuilder.forAddress("127.0.0.1", frontend.port()).usePlaintext().flowControlWindow(1 << 20).build();
    }

    @AfterEach
    void stop() throws Exception {
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        frontend.close();
        host.close();
        TestSupport.assertNoBackplaneThreads();
    }

    @Test
    void stream_clientNotReading_turnsNotReady_readyAgainWhenItReads_andWhenItCancels() throws Exception {
        Reader reader = new Reader();
        var requests = GRPCInferenceServiceGrpc.newStub(channel).withDeadlineAfter(30, TimeUnit.SECONDS).modelStreamInfer(reader);
        requests.onNext(GrpcStreamTest.repeat("held-1", 1, false));
        ResponseObserver observer = held.poll(10, TimeUnit.SECONDS);
        assertNotNull(observer, "the frontend streamed the request");

        int pushed = fillUntilNotReady(observer, 0);
        CompletionStage<Void> waiting = observer.ready();
        assertFalse(done(waiting), "a client that reads nothing makes the stream not ready (after " + pushed + " responses of 64 KiB)");
        reader.call.request(pushed);
        await(() -> done(waiting), "the stream to turn ready once the client reads");
        await(() -> reader.got.get() == pushed, "every response to arrive");

        int more = fillUntilNotReady(observer, pushed);
        CompletionStage<Void> stalled = observer.ready();
        assertFalse(done(stalled), "not ready again after " + more + " more");
        reader.call.cancel("the client walks away", null);
        await(() -> done(stalled), "the cancelled stream to let its waiters go");
        // gRPC may run the on-ready handler (which lets "stalled" go) before it delivers the
        // cancellation; once that arrives, every later ready() is complete at once.
        await(() -> done(observer.ready()), "a stream that ended to be always ready");
        assertTrue(done(observer.ready()), "a stream that ended stays ready");
        handle.done = true;
        observer.onError(new BackplaneException(ErrorCode.CANCELLED, "cancelled by the client"));
    }

    /** Pushes 64 KiB responses until the stream says it is not ready; how many. */
    private static int fillUntilNotReady(ResponseObserver observer, int from) {
        int n = 0;
        while (done(observer.ready())) {
            assertTrue(n < MAX_PUSHED, "the stream stayed ready after " + MAX_PUSHED + " responses nobody read");
            Tensor out = Tensor.of("OUT", DataType.UINT8, new long[] {65536}, java.lang.foreign.MemorySegment.ofArray(new byte[65536]));
            observer.onResponse(HostResponses.stamp(InferenceResponse.of(List.of(out)), "repeat", 1, "held-" + (from + n)));
            n++;
        }
        return n;
    }

    private static boolean done(CompletionStage<Void> stage) {
        return stage.toCompletableFuture().isDone();
    }

    private static void await(BooleanSupplier condition, String what) {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() - end < 0, "waited 30 s in vain for " + what);
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(2));
        }
    }

    private static final class Handle implements RequestHandle {
        volatile boolean done;

        @Override
        public long id() {
            return 1;
        }

        @Override
        public boolean cancel() {
            return true;
        }

        @Override
        public boolean isDone() {
            return done;
        }
    }

    /** Reads nothing until the test asks for messages. */
    private static final class Reader implements ClientResponseObserver<ModelInferRequest, ModelStreamInferResponse> {
        final AtomicInteger got = new AtomicInteger();
        final CompletableFuture<Void> ended = new CompletableFuture<>();
        volatile ClientCallStreamObserver<ModelInferRequest> call;

        @Override
        public void beforeStart(ClientCallStreamObserver<ModelInferRequest> requestStream) {
            call = requestStream;
            requestStream.disableAutoRequestWithInitial(0);
        }

        @Override
        public void onNext(ModelStreamInferResponse value) {
            got.incrementAndGet();
        }

        @Override
        public void onError(Throwable t) {
            ended.complete(null);
        }

        @Override
        public void onCompleted() {
            ended.complete(null);
        }
    }
}
