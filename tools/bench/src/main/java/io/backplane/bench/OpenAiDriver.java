package io.backplane.bench;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpResponse.BodySubscribers;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Flow;
import org.jspecify.annotations.Nullable;

/**
 * Streamed completions over the JDK's HTTP client (HTTP/1.1, so one connection per stream in
 * flight): each call is a {@code POST} of {@link OpenAiOptions#body()}, its body read line by line
 * as it arrives into an {@link SseStream}, each line timed when it is read.
 */
final class OpenAiDriver implements AutoCloseable {
    private final HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(10)).build();
    private final OpenAiOptions options;
    private final URI uri;
    private final String body;

    OpenAiDriver(OpenAiOptions options) {
        this.options = options;
        this.uri = options.uri();
        this.body = options.body();
    }

    private HttpRequest.Builder request(URI to) {
        HttpRequest.Builder b = HttpRequest.newBuilder(to);
        if (options.apiKey() != null) {
            b.header("Authorization", "Bearer " + options.apiKey());
        }
        return b;
    }

    /**
     * Checks that the server answers at all ({@code GET /v1/models}, whatever its status), so that
     * a wrong address fails the run at once rather than counting a refused connection per request.
     *
     * @throws IllegalStateException saying where it looked and what to check, when nothing answers
     */
    void probe() throws IOException, InterruptedException {
        URI models = URI.create(options.root() + "/v1/models");
        try {
            client.send(request(models).timeout(Duration.ofSeconds(30)).GET().build(), HttpResponse.BodyHandlers.discarding());
        } catch (java.net.ConnectException | HttpConnectTimeoutException e) {
            throw new IllegalStateException("cannot reach " + options.root() + " (" + Bench.describe(e) + "). Is an OpenAI-compatible server "
                    + "running there? Give its base URL with --openai-url (Backplane's OpenAI frontend listens on port 9000 by default).", e);
        }
    }

    /** Sends one request; completes with its figures, or fails with the server's message. */
    CompletableFuture<SseStream.Generation> call() {
        return call(SseStream.Listener.NONE);
    }

    /** {@link #call()}, telling {@code listener} of each event as it is read. */
    CompletableFuture<SseStream.Generation> call(SseStream.Listener listener) {
        HttpRequest req = request(uri).header("Content-Type", "application/json").header("Accept", "text/event-stream")
                .POST(HttpRequest.BodyPublishers.ofString(body)).build();
        long sent = System.nanoTime();
        return client.sendAsync(req, info -> subscriber(info, sent, listener)).thenApply(r -> r.body().orThrow());
    }

    /** What one request ended with: its figures, or an error message. */
    private record Outcome(SseStream.@Nullable Generation generation, @Nullable String error) {
        SseStream.Generation orThrow() {
            if (generation == null) {
                throw new IllegalStateException(error);
            }
            return generation;
        }
    }

    private HttpResponse.BodySubscriber<Outcome> subscriber(HttpResponse.ResponseInfo info, long sent, SseStream.Listener listener) {
        int status = info.statusCode();
        String type = info.headers().firstValue("Content-Type").orElse("");
        if (status != 200) {
            return BodySubscribers.mapping(BodySubscribers.ofString(StandardCharsets.UTF_8),
                    text -> new Outcome(null, "HTTP " + status + " from " + uri + ": " + SseStream.errorMessage(text)));
        }
        if (type.startsWith("application/json")) {
            return BodySubscribers.mapping(BodySubscribers.ofString(StandardCharsets.UTF_8), text -> new Outcome(null, "HTTP 200 from " + uri
                    + " is not an event stream (Content-Type " + type + "): the server did not stream; it answered " + SseStream.errorMessage(text)));
        }
        Lines lines = new Lines(new SseStream(options.endpoint() == OpenAiOptions.Endpoint.chat, sent, listener));
        return BodySubscribers.fromLineSubscriber(lines, Lines::outcome, StandardCharsets.UTF_8, null);
    }

    /** Feeds the body's lines to the stream as they arrive, each with the time it was read. */
    private final class Lines implements Flow.Subscriber<String> {
        private final SseStream stream;
        private @Nullable Outcome outcome;

        Lines(SseStream stream) {
            this.stream = stream;
        }

        @Override
        public void onSubscribe(Flow.Subscription s) {
            s.request(Long.MAX_VALUE);
        }

        @Override
        public void onNext(String line) {
            stream.line(line, System.nanoTime());
        }

        @Override
        public void onError(Throwable t) {
            // the response future fails with it
        }

        @Override
        public void onComplete() {
            try {
                outcome = new Outcome(stream.end(System.nanoTime()), null);
            } catch (IllegalStateException e) {
                outcome = new Outcome(null, "error in the stream from " + uri + ": " + e.getMessage());
            }
        }

        Outcome outcome() {
            return outcome != null ? outcome : new Outcome(null, "the stream from " + uri + " ended unread");
        }
    }

    @Override
    public void close() {
        client.shutdownNow();
        try {
            client.awaitTermination(Duration.ofSeconds(5));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
