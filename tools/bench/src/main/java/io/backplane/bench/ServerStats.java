package io.backplane.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import org.jspecify.annotations.Nullable;

/**
 * Server-side figures from the statistics extension ({@code GET /v2/models/NAME/stats}, Triton's
 * {@code model_stats[].inference_stats}), read before and after a level. A server without the
 * endpoint (404, or anything unreadable) simply has no server-side figures: nothing is reported.
 */
final class ServerStats {
    private static final ObjectMapper JSON = new ObjectMapper();

    private ServerStats() {
    }

    /** Cumulative counters of one model (every version summed). */
    record Snapshot(long success, long queueNanos, long computeNanos) {
    }

    /** The model's counters, or null when the server has no statistics endpoint or it cannot be read. */
    static @Nullable Snapshot fetch(HttpClient client, URI stats) {
        try {
            HttpResponse<String> r = client.send(HttpRequest.newBuilder(stats).timeout(Duration.ofSeconds(10)).GET().build(),
                    HttpResponse.BodyHandlers.ofString());
            return r.statusCode() == 200 ? parse(r.body()) : null;
        } catch (IOException | RuntimeException e) {
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
    }

    static @Nullable Snapshot parse(String body) throws IOException {
        JsonNode models = JSON.readTree(body).path("model_stats");
        if (!models.isArray() || models.isEmpty()) {
            return null;
        }
        long success = 0;
        long queue = 0;
        long compute = 0;
        for (JsonNode m : models) {
            JsonNode s = m.path("inference_stats");
            success += s.path("success").path("count").asLong();
            queue += s.path("queue").path("ns").asLong();
            compute += s.path("compute_input").path("ns").asLong() + s.path("compute_infer").path("ns").asLong()
                    + s.path("compute_output").path("ns").asLong();
        }
        return new Snapshot(success, queue, compute);
    }

    /** {queue µs, compute µs} per request between two snapshots; NaN where there is nothing to divide. */
    static double[] perRequestMicros(@Nullable Snapshot before, @Nullable Snapshot after) {
        if (before == null || after == null || after.success() <= before.success()) {
            return new double[] {Double.NaN, Double.NaN};
        }
        double n = after.success() - before.success();
        return new double[] {(after.queueNanos() - before.queueNanos()) / n / 1e3, (after.computeNanos() - before.computeNanos()) / n / 1e3};
    }
}
