package io.backplane.benchmarks.peers;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/**
 * The HTTP peers' client: one keep-alive HTTP/1.1 connection per caller, each request written and
 * its answer read on the caller's own thread, as Python's {@code requests.Session} and Triton's
 * {@code tritonclient.http} (geventhttpclient) do. It replaced {@link java.net.http.HttpClient},
 * which hands every request and every 16 KiB of an answer between its selector thread, its
 * executor and the caller: on a 2-core machine whose cores the server's intra-op threads hold, those
 * hand-offs queued behind the model and the table reported ResNet-50 over REST at 39.7–73.9 ms
 * where Triton's own Python client measured 24 ms against the same server. Content-Length and
 * chunked answers; a connection the server closed while idle is opened again once. Not thread-safe:
 * one per caller thread.
 */
final class Http1Connection implements AutoCloseable {
    /** An answer: status, headers by lower-case name, body. */
    record Response(int status, Map<String, String> headers, byte[] body) {
        String header(String name) {
            return headers.get(name.toLowerCase(Locale.ROOT));
        }
    }

    private final String host;
    private final int port;
    private final int timeoutMillis;
    private Socket socket;
    private InputStream in;
    private OutputStream out;
    private boolean used;

    Http1Connection(URI base, Duration timeout) {
        this.host = base.getHost();
        this.port = base.getPort();
        this.timeoutMillis = Math.toIntExact(timeout.toMillis());
    }

    /** POSTs {@code body} to {@code path} with {@code headers} (Host, Content-Length and keep-alive are added). */
    Response post(String path, Map<String, String> headers, byte[] body) throws IOException {
        StringBuilder head = new StringBuilder("POST ").append(path).append(" HTTP/1.1\r\nHost: ").append(host).append(':').append(port)
                .append("\r\nContent-Length: ").append(body.length).append("\r\n");
        headers.forEach((k, v) -> head.append(k).append(": ").append(v).append("\r\n"));
        byte[] h = head.append("\r\n").toString().getBytes(StandardCharsets.ISO_8859_1);
        for (int attempt = 0; ; attempt++) {
            boolean reused = socket != null && used;
            try {
                if (socket == null) {
                    open();
                }
                out.write(h);
                out.write(body);
                out.flush();
                used = true;
                Response r = read();
                if ("close".equalsIgnoreCase(r.header("connection"))) {
                    close();
                }
                return r;
            } catch (IOException e) {
                close();
                if (!reused || attempt > 0) { // a kept-alive connection the server closed meanwhile: once more on a new one
                    throw e;
                }
            }
        }
    }

    private void open() throws IOException {
        Socket s = new Socket();
        s.setTcpNoDelay(true);
        s.setSoTimeout(timeoutMillis);
        s.connect(new InetSocketAddress(host, port), timeoutMillis);
        socket = s;
        in = new BufferedInputStream(s.getInputStream(), 64 << 10);
        out = new BufferedOutputStream(s.getOutputStream(), 64 << 10);
        used = false;
    }

    private Response read() throws IOException {
        String status = line();
        String[] parts = status.split(" ", 3);
        if (parts.length < 2 || !parts[0].startsWith("HTTP/1.")) {
            throw new IOException("not an HTTP/1.x status line: '" + status + "'");
        }
        Map<String, String> headers = new LinkedHashMap<>();
        for (String l = line(); !l.isEmpty(); l = line()) {
            int colon = l.indexOf(':');
            if (colon > 0) {
                headers.put(l.substring(0, colon).trim().toLowerCase(Locale.ROOT), l.substring(colon + 1).trim());
            }
        }
        byte[] body;
        if ("chunked".equalsIgnoreCase(headers.get("transfer-encoding"))) {
            ByteArrayOutputStream b = new ByteArrayOutputStream();
            for (int n; (n = Integer.parseInt(line().split(";", 2)[0].trim(), 16)) > 0; ) {
                b.write(exactly(n));
                line();
            }
            while (!line().isEmpty()) {
                // trailers
            }
            body = b.toByteArray();
        } else {
            String length = headers.get("content-length");
            if (length == null) {
                throw new IOException("an answer with neither Content-Length nor chunked encoding (status '" + status + "')");
            }
            body = exactly(Integer.parseInt(length));
        }
        return new Response(Integer.parseInt(parts[1]), headers, body);
    }

    private byte[] exactly(int n) throws IOException {
        byte[] b = new byte[n];
        for (int off = 0, r; off < n; off += r) {
            if ((r = in.read(b, off, n - off)) < 0) {
                throw new EOFException("the connection ended " + off + " bytes into a body of " + n);
            }
        }
        return b;
    }

    private String line() throws IOException {
        StringBuilder s = new StringBuilder();
        for (int c; (c = in.read()) != '\n'; ) {
            if (c < 0) {
                throw new EOFException("the connection ended inside a header line");
            }
            if (c != '\r') {
                s.append((char) c);
            }
        }
        return s.toString();
    }

    @Override
    public void close() {
        Socket s = socket;
        socket = null;
        if (s != null) {
            try {
                s.close();
            } catch (IOException e) {
                // closing anyway
            }
        }
    }
}
