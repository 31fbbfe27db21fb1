package io.backplane.plugin.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.spi.host.HostListener.Outcome;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * DESIGN R2 and B6 at the REST edge, with real client disconnects on loopback sockets: a client
 * that closes its connection while its request executes, streams, or waits in the queue cancels
 * that request, and the backend sees it ({@link CancelBackend}); a queued one is removed at once
 * and never reaches the backend. Each test then shows the server serving the next request.
 */
class HttpCancellationTest {
    CancelBackend backend;
    CancelBackend.Outcomes outcomes;
    BackplaneHost host;
    HttpFrontend frontend;
    int port;

    @BeforeEach
    void start() throws Exception {
        backend = new CancelBackend();
        outcomes = new CancelBackend.Outcomes();
        host = backend.host(outcomes);
        frontend = (HttpFrontend) new HttpFrontendFactory().create(TestSupport.context(host, Map.of("host", "127.0.0.1", "port", "0")));
        frontend.start();
        port = frontend.port();
    }

    @AfterEach
    void stop() {
        backend.release.countDown();
        frontend.close();
        host.close();
        TestSupport.assertPortClosed(port);
        TestSupport.assertNoBackplaneThreads();
        assertEquals(List.of(), backend.problems, "the models waited for a cancellation that never came");
    }

    @Test
    void infer_clientClosesConnectionMidExecute_modelSeesCancellation_nextRequestServed() throws Exception {
        try (Socket s = connect()) {
            send(s, infer("wait", 1));
            assertEquals("1", started());
        } // the client goes away while the model executes
        assertEquals("1", backend.cancelled.poll(30, TimeUnit.SECONDS), "the model did not see the closed connection as a cancellation");
        assertEquals(new CancelBackend.Outcomes.Ended("wait", Outcome.CANCELED, true), outcomes.next());

        backend.release.countDown();
        String answer = exchange(infer("wait", 2));
        assertTrue(answer.startsWith("HTTP/1.1 200 "), answer);
        assertTrue(answer.contains("[2.0]"), answer);
        assertEquals("2", started());
    }

    @Test
    void generateStream_clientClosesAfterThreeEvents_modelSeesCancellationAndStops_nextStreamServed() throws Exception {
        streamThenClose("first", 3);
        String seen = backend.cancelled.poll(30, TimeUnit.SECONDS);
        assertTrue(seen != null && seen.startsWith("first after "), "the model did not see the closed stream as a cancellation: " + seen);
        assertTrue(Integer.parseInt(seen.substring("first after ".length())) >= 3, seen);
        assertEquals(new CancelBackend.Outcomes.Ended("tokens", Outcome.CANCELED, true), outcomes.next());

        // the one instance stopped streaming to the closed connection: it serves the next stream
        streamThenClose("second", 1);
        String second = backend.cancelled.poll(30, TimeUnit.SECONDS);
        assertTrue(second != null && second.startsWith("second after "), "the second stream's cancellation: " + second);
        assertEquals(List.of(), List.copyOf(backend.started), "no other stream reached the model");
    }

    @Test
    void infer_queuedRequestWhoseClientCloses_removedAtOnce_neverReachesTheModel() throws Exception {
        try (Socket held = connect()) {
            send(held, infer("wait", 1));
            assertEquals("1", started());
            try (Socket queued = connect()) {
                send(queued, infer("wait", 2));
                outcomes.awaitAccepted("wait", 2); // queued behind request 1 on the only instance
            } // its client goes away while it waits
            assertEquals(new CancelBackend.Outcomes.Ended("wait", Outcome.CANCELED, false), outcomes.next(),
                    "the queued request ends CANCELLED at once, while the instance is still busy, without being dispatched");

            backend.release.countDown();
            String answer = readToEnd(held.getInputStream());
            assertTrue(answer.startsWith("HTTP/1.1 200 "), "the held request completes normally: " + answer);
            assertTrue(answer.contains("[1.0]"), answer);
        }
        String next = exchange(infer("wait", 3));
        assertTrue(next.startsWith("HTTP/1.1 200 "), next);
        assertEquals("3", started(), "the cancelled request 2 never reached the model");
        assertNull(backend.cancelled.poll(), "the model saw no cancellation: the request never reached it");
    }

    // ---- helpers ----

    /** Starts a generate_stream of {@code text}, reads {@code events} events, then closes the connection. */
    private void streamThenClose(String text, int events) throws Exception {
        try (Socket s = connect()) {
            String body = "{\"text_input\":\"" + text + "\"}";
            send(s, post("/v2/models/tokens/generate_stream", body));
            assertEquals(text, started());
            InputStream in = s.getInputStream();
            ByteArrayOutputStream got = new ByteArrayOutputStream();
            byte[] buf = new byte[256];
            while (count(got.toString(StandardCharsets.ISO_8859_1), "data: ") < events) {
                int n = in.read(buf);
                assertTrue(n > 0, "the stream ended before " + events + " events: " + got.toString(StandardCharsets.ISO_8859_1));
                got.write(buf, 0, n);
            }
            String head = got.toString(StandardCharsets.ISO_8859_1);
            assertTrue(head.startsWith("HTTP/1.1 200 ") && head.contains("text/event-stream"), head);
            assertFalse(head.contains("error"), head);
        }
    }

    private String started() throws InterruptedException {
        String tag = backend.started.poll(30, TimeUnit.SECONDS);
        assertTrue(tag != null, "no request reached the model within 30 s");
        return tag;
    }

    private static int count(String s, String what) {
        int n = 0;
        for (int i = s.indexOf(what); i >= 0; i = s.indexOf(what, i + what.length())) {
            n++;
        }
        return n;
    }

    private Socket connect() throws IOException {
        Socket s = new Socket();
        s.connect(new InetSocketAddress("127.0.0.1", port), 10_000);
        s.setSoTimeout(60_000);
        return s;
    }

    private static void send(Socket s, String raw) throws IOException {
        s.getOutputStream().write(raw.getBytes(StandardCharsets.ISO_8859_1));
        s.getOutputStream().flush();
    }

    /** One request on a connection of its own ({@code Connection: close}): the whole answer. */
    private String exchange(String raw) throws IOException {
        try (Socket s = connect()) {
            send(s, raw.replace("Host: x\r\n", "Host: x\r\nConnection: close\r\n"));
            return readToEnd(s.getInputStream());
        }
    }

    private static String readToEnd(InputStream in) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        byte[] buf = new byte[8192];
        int n;
        while ((n = in.read(buf)) >= 0) {
            out.write(buf, 0, n);
            String sofar = out.toString(StandardCharsets.ISO_8859_1);
            if (sofar.contains("\r\n\r\n") && complete(sofar)) {
                break;
            }
        }
        return out.toString(StandardCharsets.ISO_8859_1);
    }

    /** Whether a response with a Content-Length has all its body (a keep-alive connection is not closed after it). */
    private static boolean complete(String response) {
        int end = response.indexOf("\r\n\r\n");
        String head = response.substring(0, end).toLowerCase(java.util.Locale.ROOT);
        int at = head.indexOf("content-length:");
        if (at < 0) {
            return false;
        }
        int eol = head.indexOf("\r\n", at);
        long length = Long.parseLong(head.substring(at + "content-length:".length(), eol < 0 ? head.length() : eol).trim());
        return response.length() - end - 4 >= length;
    }

    private static String infer(String model, int value) {
        return post("/v2/models/" + model + "/infer", "{\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[" + value + ".0]}]}");
    }

    private static String post(String path, String body) {
        return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " + body.getBytes(StandardCharsets.UTF_8).length
                + "\r\n\r\n" + body;
    }
}
