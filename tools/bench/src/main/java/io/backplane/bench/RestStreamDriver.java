package io.backplane.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.backplane.spi.DataType;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Flow;
import org.jspecify.annotations.Nullable;

/**
 * A decoupled model over REST: each request is a {@code POST …/generate_stream}, its responses
 * server-sent events; the time of each {@code data:} line is recorded (time to first response,
 * between responses). Inputs are zeros as JSON arrays (BYTES: "x"), one key per input, as the
 * generate extension takes them.
 */
final class RestStreamDriver implements Bench.Driver {
    private static final ObjectMapper JSON = new ObjectMapper();

    private final HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(10)).build();
    private final URI uri;
    private final URI statsUri;
    private final String body;

    RestStreamDriver(BenchOptions o) throws IOException, InterruptedException {
        URI base = base(o);
        String modelPath = base.getPath() + "/v2/models/" + o.model() + (o.version() > 0 ? "/versions/" + o.version() : "");
        JsonNode md = JSON.readTree(get(base.resolve(modelPath), base));
        ObjectNode request = JSON.createObjectNode();
        for (JsonNode t : md.path("inputs")) {
            long elements = 1;
            if (o.inputShape() != null) {
                for (long d : o.inputShape()) {
                    elements *= d;
                }
            } else {
                for (JsonNode d : t.path("shape")) {
                    elements *= Math.max(1, d.asLong());
                }
            }
            String type = o.inputDatatype() != null ? o.inputDatatype() : t.path("datatype").asText();
            ArrayNode data = request.putArray(t.path("name").asText());
            for (long i = 0; i < elements; i++) {
                if (DataType.fromProtocolName(type) == DataType.BYTES) {
                    data.add("x");
                } else if (DataType.fromProtocolName(type) == DataType.BOOL) {
                    data.add(false);
                } else {
                    data.add(0);
                }
            }
        }
        body = JSON.writeValueAsString(request);
        uri = base.resolve(modelPath + "/generate_stream");
        statsUri = base.resolve(base.getPath() + "/v2/models/" + o.model() + "/stats");
    }

    private static URI base(BenchOptions o) {
        String url = java.util.Objects.requireNonNull(o.url(), "url is null");
        return URI.create(url.endsWith("/") ? url.substring(0, url.length() - 1) : url);
    }

    private String get(URI what, URI base) throws IOException, InterruptedException {
        HttpResponse<String> r;
        try {
            r = client.send(HttpRequest.newBuilder(what).timeout(Duration.ofSeconds(30)).GET().build(), HttpResponse.BodyHandlers.ofString());
        } catch (java.net.ConnectException e) {
            throw Bench.unreachable(base.toString(), e);
        }
        if (r.statusCode() != 200) {
            throw new IllegalStateException("GET " + what + " answered " + r.statusCode() + ": " + r.body());
        }
        return r.body();
    }

    /** Whether the REST target's model is decoupled (its config's model_transaction_policy says so). */
    static boolean decoupled(BenchOptions o) throws IOException, InterruptedException {
        if (o.url() == null) {
            return false;
        }
        URI base = base(o);
        URI config = base.resolve(base.getPath() + "/v2/models/" + o.model() + (o.version() > 0 ? "/versions/" + o.version() : "") + "/config");
        try (HttpClient c = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(10)).build()) {
            HttpResponse<String> r;
            try {
                r = c.send(HttpRequest.newBuilder(config).timeout(Duration.ofSeconds(30)).GET().build(), HttpResponse.BodyHandlers.ofString());
            } catch (java.net.ConnectException e) {
                throw Bench.unreachable(base.toString(), e);
            }
            return r.statusCode() == 200 && JSON.readTree(r.body()).path("model_transaction_policy").path("decoupled").asBoolean(false);
        }
    }

    @Override
    public boolean streaming() {
        return true;
    }

    @Override
    public ServerStats.@Nullable Snapshot stats() {
        return ServerStats.fetch(client, statsUri);
    }

    @Override
    public CompletableFuture<?> call() {
        CompletableFuture<Bench.StreamTimes> f = new CompletableFuture<>();
        List<Long> arrivals = new ArrayList<>();
        StringBuilder error = new StringBuilder();
        HttpRequest req = HttpRequest.newBuilder(uri).header("Content-Type", "application/json").header("Accept", "text/event-stream")
                .POST(HttpRequest.BodyPublishers.ofString(body)).build();
        client.sendAsync(req, HttpResponse.BodyHandlers.fromLineSubscriber(new Flow.Subscriber<String>() {
            @Override
            public void onSubscribe(Flow.Subscription s) {
                s.request(Long.MAX_VALUE);
            }

            @Override
            public void onNext(String line) {
                long now = System.nanoTime();
                synchronized (arrivals) {
                    if (line.startsWith("data:")) {
                        arrivals.add(now);
                        if (line.contains("\"error\"") && error.isEmpty()) {
                            error.append(line.substring(5).strip());
                        }
                    } else if (!line.isBlank() && error.length() < 500) {
                        error.append(line.strip()); // a plain (non-event) answer: an error body
                    }
                }
            }

            @Override
            public void onError(Throwable t) {
                f.completeExceptionally(t);
            }

            @Override
            public void onComplete() {
                // the response future below completes the request
            }
        })).whenComplete((r, e) -> {
            synchronized (arrivals) {
                if (e != null) {
                    f.completeExceptionally(e);
                } else if (r.statusCode() != 200) {
                    f.completeExceptionally(new IllegalStateException("HTTP " + r.statusCode() + " from " + uri + ": " + error));
                } else if (!error.isEmpty()) {
                    f.completeExceptionally(new IllegalStateException("error event from " + uri + ": " + error));
                } else {
                    f.complete(new Bench.StreamTimes(arrivals.stream().mapToLong(Long::longValue).toArray()));
                }
            }
        });
        return f;
    }

    @Override
    public void close() {
        client.close();
    }
}
