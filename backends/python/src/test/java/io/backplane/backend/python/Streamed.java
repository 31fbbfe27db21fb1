package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertNotNull;

import io.backplane.core.BackplaneHost;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.host.ResponseObserver;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;

/** A streamed request's responses as they come, and how it ended (null: completed; else its error). */
final class Streamed implements ResponseObserver {
    final LinkedBlockingQueue<InferenceResponse> responses = new LinkedBlockingQueue<>();
    final CompletableFuture<@Nullable BackplaneException> end = new CompletableFuture<>();

    /** A finished stream: every response, and its error (null when it completed). */
    record Result(List<InferenceResponse> responses, @Nullable BackplaneException error) {
    }

    /** Streams {@code request} on {@code host} and waits up to {@code seconds} for its end. */
    static Result collect(BackplaneHost host, InferenceRequest request, long seconds) throws Exception {
        Streamed s = new Streamed();
        host.stream(request, s);
        BackplaneException error = s.end.get(seconds, TimeUnit.SECONDS);
        return new Result(new ArrayList<>(s.responses), error);
    }

    @Override
    public void onResponse(InferenceResponse response) {
        responses.add(response);
    }

    @Override
    public void onComplete() {
        end.complete(null);
    }

    @Override
    public void onError(BackplaneException error) {
        end.complete(error);
    }

    /** The next response, waiting up to 60 s. */
    InferenceResponse next() throws InterruptedException {
        InferenceResponse r = responses.poll(60, TimeUnit.SECONDS);
        assertNotNull(r, "no response within 60 s");
        return r;
    }
}
