package io.backplane.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.plugin.http.HttpFrontendFactory;
import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.FrontendContext;
import io.backplane.spi.host.InferenceService;
import io.backplane.testkit.IdentityBackendFactory;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code backplane bench}'s command line against a real host and its REST frontend: help, exit
 * status, output formats, streaming for a decoupled model, clear errors. Runs are short; figures
 * are checked for presence and consistency, never for speed.
 */
class BenchCliTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static BackplaneHost host;
    private static Frontend http;
    private static String url;

    @TempDir
    Path dir;

    @BeforeAll
    static void start() throws Exception {
        host = BackplaneHost.builder().backend(new IdentityBackendFactory()).modelControlMode(ModelControlMode.EXPLICIT)
                .model(IdentityBackendFactory.model("identity", 1)).model(IdentityBackendFactory.decoupledModel("stream3", 3))
                .loadModel("identity").loadModel("stream3").build();
        http = new HttpFrontendFactory().create(new FrontendContext() {
            @Override
            public InferenceService service() {
                return host;
            }

            @Override
            public Map<String, String> options() {
                return Map.of("host", "127.0.0.1", "port", "0");
            }
        });
        http.start();
        url = http.endpoint().replace("0.0.0.0", "127.0.0.1");
    }

    @AfterAll
    static void stop() throws Exception {
        try {
            http.close();
        } finally {
            host.close();
        }
    }

    private record Exit(int status, String out, String err) {
    }

    private static Exit bench(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int status = BenchCli.execute(args, new PrintWriter(out, true), new PrintWriter(err, true));
        return new Exit(status, out.toString(), err.toString());
    }

    private static String[] quick(String... args) {
        // a count per level, the duration only a limit: every level measures requests, however loaded the machine
        List<String> all = new ArrayList<>(List.of("--concurrency", "1,2", "--request-count", "20", "--duration-s", "120", "--warmup-s", "0.1"));
        all.addAll(List.of(args));
        return all.toArray(String[]::new);
    }

    @Test
    void help_onStdoutWithDescriptions_exit0() {
        Exit e = bench("--help");
        assertEquals(0, e.status(), e.err());
        for (String option : List.of("--url", "--grpc", "--embedded-repository", "--format", "--output", "--max-error-rate", "--concurrency")) {
            assertTrue(e.out().contains(option), option + " missing from:\n" + e.out());
        }
        assertTrue(e.out().contains("Exit status"), e.out());
        assertEquals("", e.err());
    }

    @Test
    void badOption_exit2_namesTheOption() {
        Exit e = bench("--url", url, "--model", "identity", "--bogus", "1");
        assertEquals(2, e.status());
        assertTrue(e.err().contains("--bogus") && e.err().contains("--help"), e.err());
    }

    @Test
    void refusedConnection_exit1_saysWhatToCheck() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort(); // closed again: nothing listens there
        }
        Exit e = bench(quick("--url", "http://127.0.0.1:" + port, "--model", "identity"));
        assertEquals(1, e.status(), e.out());
        assertTrue(e.err().contains("cannot reach http://127.0.0.1:" + port) && e.err().contains("connection refused")
                && e.err().contains("backplane serve"), e.err());
    }

    @Test
    void rest_csv_headerAndOneLinePerLevelWithP95() {
        Exit e = bench(quick("--url", url, "--model", "identity", "--format", "csv"));
        assertEquals(0, e.status(), e.err());
        List<String> lines = e.out().lines().toList();
        assertEquals(3, lines.size(), e.out());
        assertTrue(lines.get(0).startsWith("target,model,concurrency,requests,errors,") && lines.get(0).contains(",p95_us,"), lines.get(0));
        assertTrue(lines.get(1).contains(",identity,1,") && lines.get(2).contains(",identity,2,"), e.out());
    }

    @Test
    void rest_jsonToFile_percentilesOrdered_serverStatsFromTheStatisticsEndpoint() throws Exception {
        Path file = dir.resolve("out.json");
        Exit e = bench(quick("--url", url, "--model", "identity", "--format", "json", "--output", file.toString()));
        assertEquals(0, e.status(), e.err());
        assertEquals("", e.out());
        JsonNode doc = JSON.readTree(Files.readString(file));
        assertFalse(doc.get("streaming").asBoolean());
        for (JsonNode l : doc.get("levels")) {
            assertTrue(l.get("requests").asLong() > 0, l.toString());
            assertTrue(l.get("p50_us").asDouble() <= l.get("p95_us").asDouble() && l.get("p95_us").asDouble() <= l.get("p99_us").asDouble(), l.toString());
            // the REST frontend serves Triton's statistics extension: bench reports the server's side
            assertTrue(l.get("server_queue_us").isNumber() && l.get("server_compute_us").isNumber(), "server-side times from /stats: " + l);
        }
    }

    @Test
    void rest_everyRequestFails_exit1AboveThreshold_exit0WhenAllowed() {
        // INT32 inputs for an FP32 model: every request is refused
        Exit e = bench(quick("--url", url, "--model", "identity", "--input-datatype", "INT32"));
        assertEquals(1, e.status(), e.out());
        assertTrue(e.err().contains("requests failed at concurrency 1") && e.err().contains("--max-error-rate"), e.err());
        Exit allowed = bench(quick("--url", url, "--model", "identity", "--input-datatype", "INT32", "--max-error-rate", "1"));
        assertEquals(0, allowed.status(), allowed.err());
    }

    @Test
    void rest_decoupledModel_overGenerateStream_firstAndBetweenResponses() throws Exception {
        Exit e = bench(quick("--url", url, "--model", "stream3", "--format", "json"));
        assertEquals(0, e.status(), e.err() + e.out());
        JsonNode doc = JSON.readTree(e.out());
        assertTrue(doc.get("streaming").asBoolean(), e.out());
        for (JsonNode l : doc.get("levels")) {
            assertEquals(0, l.get("errors").asLong(), l.toString());
            // three data responses, then the empty FINAL closes the stream without an event of its own
            assertEquals(3 * l.get("requests").asLong(), l.get("responses").asLong(), l.toString());
            assertFalse(l.get("first_response_p50_us").isNull(), l.toString());
            assertFalse(l.get("between_responses_p50_us").isNull(), l.toString());
        }
    }

    @Test
    void embedded_decoupledModel_blockingClientsOverStream() throws Exception {
        BenchResult r = Bench.run(BenchOptions.builder("stream3").service(host).concurrency(List.of(1, 2)).requestCount(20)
                .duration(Duration.ofSeconds(120)).warmup(Duration.ofMillis(100)).build());
        assertTrue(r.streaming(), r.table());
        for (BenchResult.Level l : r.levels()) {
            assertTrue(l.requests() > 0 && l.errors() == 0, r.table());
            assertEquals(3 * l.requests(), l.responses(), r.table());
        }
        assertTrue(r.table().contains("first p50 µs"), r.table());
    }

    @Test
    void serverStats_tritonStatistics_perRequestQueueAndCompute() throws Exception {
        ServerStats.Snapshot before = ServerStats.parse("""
                {"model_stats":[{"name":"m","version":"1","inference_stats":{"success":{"count":10,"ns":0},"queue":{"count":10,"ns":1000000},
                "compute_input":{"count":10,"ns":100000},"compute_infer":{"count":10,"ns":2000000},"compute_output":{"count":10,"ns":100000}}}]}""");
        ServerStats.Snapshot after = ServerStats.parse("""
                {"model_stats":[{"name":"m","version":"1","inference_stats":{"success":{"count":20,"ns":0},"queue":{"count":20,"ns":3000000},
                "compute_input":{"count":20,"ns":200000},"compute_infer":{"count":20,"ns":4000000},"compute_output":{"count":20,"ns":200000}}}]}""");
        assertNotNull(before);
        double[] perRequest = ServerStats.perRequestMicros(before, after);
        assertEquals(200.0, perRequest[0], 1e-9); // (3 ms - 1 ms) / 10 requests
        assertEquals(220.0, perRequest[1], 1e-9); // (4.4 ms - 2.2 ms) / 10 requests
        assertTrue(Double.isNaN(ServerStats.perRequestMicros(before, null)[0]));
    }
}
