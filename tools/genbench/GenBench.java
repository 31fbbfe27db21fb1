import com.google.protobuf.ByteString;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.InferTensorContents;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelStreamInferResponse;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.io.InputStream;
import java.lang.management.ManagementFactory;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Generation benchmark (tools/genbench.sh): the server-side cost per streamed token and the time
 * from a client's disconnect to the model seeing {@code is_cancelled()}, through the real server
 * ({@code dist/target/backplane/bin/backplane serve}) on its three streaming protocols: the
 * OpenAI-compatible frontend (SSE {@code POST /v1/completions}, {@code "stream": true}), Triton's
 * generate extension ({@code POST /v2/models/M/generate_stream}, SSE) and gRPC
 * {@code ModelStreamInfer}.
 *
 * <p>Two decoupled models that do no compute: {@code gen_py}, a Triton python_backend model run by
 * the python backend (through its stub process), and {@code gen_java}, the same in Java
 * (GenJavaBackend, in-process: no stub). Per token: prompt {@code "burst N"}, N tokens sent
 * back-to-back; a trial's per-token time is (last - first token's arrival at the client)/(N-1),
 * one stream at a time. Also the CPU time the server JVM, the stub and this client spent per
 * token over the measured trials (/proc, 10 ms ticks). Cancellation: prompt
 * {@code "forever TAG"}, a token every millisecond until {@code is_cancelled()}; the client reads
 * K tokens, notes the wall clock and closes its socket (SSE) or cancels its call (gRPC); the
 * python model writes {@code time.time()} when it first sees the cancellation; the difference is
 * one trial. Not a test: it asserts nothing, it prints.
 */
public final class GenBench {
    static final String MODEL_PY = """
            import json, time
            import numpy as np
            import triton_python_backend_utils as pb_utils

            class TritonPythonModel:
                def initialize(self, args):
                    self.marks = json.loads(args["model_config"])["parameters"]["marks"]["string_value"]

                def execute(self, requests):
                    for r in requests:
                        self.run(r)
                    return None

                def token(self, i):
                    return pb_utils.InferenceResponse([pb_utils.Tensor("text_output", np.array([(" t%d" % i).encode()], dtype=np.object_))])

                def run(self, r):
                    sender = r.get_response_sender()
                    t = pb_utils.get_input_tensor_by_name(r, "text_input").as_numpy().reshape(-1)[0]
                    words = (t.decode("utf-8") if isinstance(t, bytes) else str(t)).split()
                    if words[0] == "burst":
                        for i in range(int(words[1])):
                            sender.send(self.token(i))
                    else:
                        n = 0
                        deadline = time.monotonic() + 60
                        while True:
                            if r.is_cancelled():
                                seen = time.time()
                                with open(self.marks, "a") as f:
                                    f.write("%s %.6f %d\\n" % (words[1], seen, n))
                                break
                            if time.monotonic() > deadline:
                                with open(self.marks, "a") as f:
                                    f.write("%s timeout %d\\n" % (words[1], n))
                                break
                            sender.send(self.token(n))
                            n += 1
                            time.sleep(0.001)
                    sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            """;

    static final String CONFIG = """
            name: "%s"
            backend: "%s"
            model_transaction_policy { decoupled: true }
            input [
              { name: "text_input" data_type: TYPE_STRING dims: [1] },
              { name: "stream" data_type: TYPE_BOOL dims: [1] optional: true },
              { name: "sampling_parameters" data_type: TYPE_STRING dims: [1] optional: true }
            ]
            output [{ name: "text_output" data_type: TYPE_STRING dims: [-1] }]
            instance_group [{ count: 1 kind: KIND_CPU }]
            parameters { key: "marks" value { string_value: "%s" } }
            """;

    static final Pattern SERVING = Pattern.compile("frontend '([^']+)' serving at \\S+:(\\d+)");
    static final List<String> PROTOCOLS = List.of("openai", "generate_stream", "grpc");

    final Path dir;
    final Path marks;
    Process server;
    Path log;
    int httpPort;
    int grpcPort;
    int openaiPort;
    ManagedChannel channel;
    GRPCInferenceServiceGrpc.GRPCInferenceServiceStub grpc;

    GenBench(Path dir) {
        this.dir = dir;
        this.marks = dir.resolve("marks");
    }

    public static void main(String[] args) throws Exception {
        Path dist = Path.of("dist/target/backplane");
        Path backends = null;
        int tokens = 500;
        int trials = 100;
        int warmup = 100;
        int cancelTrials = 30;
        int k = 3;
        List<String> protocols = PROTOCOLS;
        List<String> models = List.of("gen_py", "gen_java");
        boolean cancel = true;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--dist" -> dist = Path.of(args[i + 1]);
                case "--backend-directory" -> backends = Path.of(args[i + 1]);
                case "--tokens" -> tokens = Integer.parseInt(args[i + 1]);
                case "--trials" -> trials = Integer.parseInt(args[i + 1]);
                case "--warmup" -> warmup = Integer.parseInt(args[i + 1]);
                case "--cancel-trials" -> cancelTrials = Integer.parseInt(args[i + 1]);
                case "--cancel-after" -> k = Integer.parseInt(args[i + 1]);
                case "--protocols" -> protocols = List.of(args[i + 1].split(","));
                case "--models" -> models = List.of(args[i + 1].split(","));
                case "--cancel" -> cancel = Boolean.parseBoolean(args[i + 1]);
                default -> throw new IllegalArgumentException("unknown option '" + args[i] + "': use --dist, --backend-directory, --tokens, --trials, "
                        + "--warmup, --cancel-trials, --cancel-after, --protocols (of " + PROTOCOLS + "), --models (of gen_py,gen_java), --cancel (true/false)");
            }
        }
        if (backends == null) {
            throw new IllegalArgumentException("--backend-directory is missing: the folder with genjava/genjava.jar (tools/genbench.sh makes it)");
        }
        GenBench b = new GenBench(Files.createTempDirectory("genbench"));
        try {
            b.start(dist.toAbsolutePath(), backends.toAbsolutePath());
            System.out.printf(Locale.ROOT, "genbench %s, %d cores, Java %s, loadavg before: %s%n", Instant.now(), Runtime.getRuntime().availableProcessors(),
                    Runtime.version(), loadavg());
            System.out.printf(Locale.ROOT, "%nPer token (1 stream, %d tokens back-to-back per trial, %d trials after %d warm-up): µs per token%n", tokens, trials, warmup);
            System.out.printf(Locale.ROOT, "%-16s %-9s %8s %8s %8s %8s | %12s %12s %8s | %s%n", "protocol", "model", "p50", "p99", "max", "min",
                    "cpu srv(sys)", "cpu stub(sys)", "cpu clnt", "loadavg");
            for (String protocol : protocols) {
                for (String model : models) {
                    b.perToken(protocol, model, tokens, trials, warmup);
                }
            }
            if (!cancel) {
                return;
            }
            System.out.printf(Locale.ROOT, "%nDisconnect to is_cancelled() in the python model (%d trials, the client goes away after %d tokens; the model checks every ~1 ms): ms%n",
                    cancelTrials, k);
            System.out.printf(Locale.ROOT, "%-16s %8s %8s %8s %8s | %s%n", "protocol", "p50", "p99", "max", "min", "loadavg");
            for (String protocol : protocols) {
                b.cancellation(protocol, cancelTrials, k);
            }
        } finally {
            b.stop();
        }
    }

    // ---- the server ----

    void start(Path dist, Path backends) throws Exception {
        Path repo = dir.resolve("repo");
        for (String[] m : new String[][] {{"gen_py", "python"}, {"gen_java", "genjava"}}) {
            Files.createDirectories(repo.resolve(m[0]).resolve("1"));
            if (m[1].equals("python")) {
                Files.writeString(repo.resolve(m[0]).resolve("1/model.py"), MODEL_PY);
            }
            Files.writeString(repo.resolve(m[0]).resolve("config.pbtxt"), CONFIG.formatted(m[0], m[1], marks));
        }
        log = dir.resolve("serve.log");
        List<String> cmd = new ArrayList<>(List.of(dist.resolve("bin/backplane").toString(), "serve", "--model-repository", repo.toString(),
                "--model-control-mode", "explicit", "--load-model", "gen_py", "--load-model", "gen_java", "--backend-directory", backends.toString(),
                "--builtin-warmup=false", "--exit-timeout-secs", "3", "--metrics-port", "-1"));
        for (String f : List.of("http", "grpc", "openai")) {
            cmd.addAll(List.of("--" + f + "-address", "127.0.0.1", "--" + f + "-port", "0"));
        }
        server = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(4);
        while (true) {
            String out = Files.readString(log);
            if (out.contains(" started in ")) {
                Matcher m = SERVING.matcher(out);
                while (m.find()) {
                    int port = Integer.parseInt(m.group(2));
                    switch (m.group(1)) {
                        case "http" -> httpPort = port;
                        case "grpc" -> grpcPort = port;
                        case "openai" -> openaiPort = port;
                        default -> { }
                    }
                }
                break;
            }
            if (!server.isAlive() || System.nanoTime() > deadline) {
                throw new IllegalStateException("serve did not start:\n" + out);
            }
            Thread.sleep(100);
        }
        channel = Grpc.newChannelBuilderForAddress("127.0.0.1", grpcPort, InsecureChannelCredentials.create()).build();
        grpc = GRPCInferenceServiceGrpc.newStub(channel);
    }

    void stop() throws Exception {
        if (channel != null) {
            channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
        }
        if (server != null) {
            List<ProcessHandle> children = server.descendants().toList();
            server.destroy(); // SIGTERM: the server drains, stops its stubs and exits
            if (!server.waitFor(60, TimeUnit.SECONDS)) {
                server.destroyForcibly();
            }
            children.forEach(ProcessHandle::destroyForcibly);
            if (server.exitValue() != 0) {
                System.out.println("serve exited with " + server.exitValue() + "; its log:\n" + Files.readString(log));
            }
        }
        try (var s = Files.walk(dir)) {
            s.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
    }

    // ---- per token ----

    void perToken(String protocol, String model, int tokens, int trials, int warmup) throws Exception {
        for (int i = 0; i < warmup; i++) {
            stream(protocol, model, "burst " + tokens, -1, null);
        }
        long[] cpu0 = cpu();
        double[] perToken = new double[trials];
        long n = 0;
        for (int i = 0; i < trials; i++) {
            long[] t = stream(protocol, model, "burst " + tokens, -1, null);
            if (t.length != tokens) {
                throw new IllegalStateException(protocol + " " + model + ": " + t.length + " tokens arrived, not " + tokens);
            }
            perToken[i] = (t[t.length - 1] - t[0]) / 1e3 / (t.length - 1);
            n += t.length;
        }
        long[] cpu1 = cpu();
        double[] s = stats(perToken);
        System.out.printf(Locale.ROOT, "%-16s %-9s %8.1f %8.1f %8.1f %8.1f | %5.1f (%4.1f) %5.1f (%4.1f) %8.1f | %s%n", protocol, model, s[0], s[1], s[2], s[3],
                (cpu1[0] - cpu0[0]) / 1e3 / n, (cpu1[3] - cpu0[3]) / 1e3 / n, (cpu1[1] - cpu0[1]) / 1e3 / n, (cpu1[4] - cpu0[4]) / 1e3 / n,
                (cpu1[2] - cpu0[2]) / 1e3 / n, loadavg());
    }

    /** CPU time so far, ns: the server JVM, its child processes (the stub), this client; then the server's and the stub's system (kernel) time. */
    long[] cpu() throws IOException {
        long[] srv = ticks(server.pid());
        long[] stub = new long[2];
        for (ProcessHandle h : server.descendants().toList()) {
            long[] t = ticks(h.pid());
            stub[0] += t[0];
            stub[1] += t[1];
        }
        long tick = 10_000_000L; // USER_HZ 100
        long client = ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime();
        return new long[] {(srv[0] + srv[1]) * tick, (stub[0] + stub[1]) * tick, client, srv[1] * tick, stub[1] * tick};
    }

    /** utime and stime of a process, in ticks (fields 14 and 15 of /proc/PID/stat); zeros when it is gone. */
    static long[] ticks(long pid) {
        try {
            String stat = Files.readString(Path.of("/proc/" + pid + "/stat"));
            String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
            return new long[] {Long.parseLong(f[11]), Long.parseLong(f[12])};
        } catch (IOException | RuntimeException e) {
            return new long[2];
        }
    }

    // ---- cancellation ----

    void cancellation(String protocol, int trials, int k) throws Exception {
        double[] ms = new double[trials];
        for (int i = 0; i < trials; i++) {
            String tag = protocol + "-" + i;
            long[] closedAtMicros = new long[1];
            stream(protocol, "gen_py", "forever " + tag, k, closedAtMicros);
            String line = awaitMark(tag);
            String[] f = line.split(" ");
            if (f[1].equals("timeout")) {
                throw new IllegalStateException(protocol + ": the model never saw the cancellation of " + tag);
            }
            double seenMicros = Double.parseDouble(f[1]) * 1e6;
            ms[i] = (seenMicros - closedAtMicros[0]) / 1e3;
        }
        double[] s = stats(ms);
        System.out.printf(Locale.ROOT, "%-16s %8.2f %8.2f %8.2f %8.2f | %s%n", protocol, s[0], s[1], s[2], s[3], loadavg());
    }

    String awaitMark(String tag) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
        while (System.nanoTime() < deadline) {
            if (Files.exists(marks)) {
                for (String l : Files.readAllLines(marks)) {
                    if (l.startsWith(tag + " ")) {
                        return l;
                    }
                }
            }
            Thread.sleep(2);
        }
        throw new IllegalStateException("no mark for " + tag + " within 90 s; log:\n" + Files.readString(log));
    }

    static long wallMicros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1000;
    }

    // ---- the three clients ----

    /**
     * One stream of {@code prompt} to {@code model}: the nanoTime each token arrived. With
     * {@code stopAfter} > 0, notes the wall clock in {@code closedAtMicros} after that many tokens
     * and goes away (closes the socket, cancels the call).
     */
    long[] stream(String protocol, String model, String prompt, int stopAfter, long[] closedAtMicros) throws Exception {
        return switch (protocol) {
            case "openai" -> sse(openaiPort, "/v1/completions",
                    "{\"model\":\"" + model + "\",\"prompt\":\"" + prompt + "\",\"stream\":true,\"max_tokens\":1000000}", stopAfter, closedAtMicros);
            case "generate_stream" -> sse(httpPort, "/v2/models/" + model + "/generate_stream", "{\"text_input\":\"" + prompt + "\"}", stopAfter,
                    closedAtMicros);
            case "grpc" -> grpcStream(model, prompt, stopAfter, closedAtMicros);
            default -> throw new IllegalArgumentException(protocol);
        };
    }

    static long[] sse(int port, String path, String body, int stopAfter, long[] closedAtMicros) throws IOException {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        long[] times = new long[1024];
        int n = 0;
        try (Socket s = new Socket("127.0.0.1", port)) {
            s.setTcpNoDelay(true);
            s.setSoTimeout(120_000);
            s.getOutputStream().write(("POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n"
                    + "Content-Length: " + b.length + "\r\n\r\n").getBytes(StandardCharsets.ISO_8859_1));
            s.getOutputStream().write(b);
            s.getOutputStream().flush();
            InputStream in = s.getInputStream();
            byte[] buf = new byte[65536];
            StringBuilder pending = new StringBuilder();
            boolean head = true;
            int r;
            while ((r = in.read(buf)) > 0) {
                long now = System.nanoTime();
                pending.append(new String(buf, 0, r, StandardCharsets.ISO_8859_1));
                if (head) {
                    if (pending.length() < 12) {
                        continue;
                    }
                    if (!pending.toString().startsWith("HTTP/1.1 200")) {
                        throw new IOException("POST " + path + ": " + pending);
                    }
                    head = false;
                }
                int end;
                while ((end = pending.indexOf("\n\n")) >= 0) {
                    String ev = pending.substring(0, end);
                    pending.delete(0, end + 2);
                    if (ev.contains("data: ") && ev.contains("\" t")) {
                        if (n == times.length) {
                            times = Arrays.copyOf(times, n * 2);
                        }
                        times[n++] = now;
                        if (n == stopAfter) {
                            closedAtMicros[0] = wallMicros();
                            return Arrays.copyOf(times, n); // try-with-resources closes the socket
                        }
                    } else if (ev.contains("\"error\"")) {
                        throw new IOException("POST " + path + ": " + ev);
                    }
                }
            }
        }
        return Arrays.copyOf(times, n);
    }

    long[] grpcStream(String model, String prompt, int stopAfter, long[] closedAtMicros) throws Exception {
        List<Long> times = new ArrayList<>();
        CompletableFuture<Void> end = new CompletableFuture<>();
        @SuppressWarnings("unchecked")
        ClientCallStreamObserver<ModelInferRequest>[] call = new ClientCallStreamObserver[1];
        StreamObserver<ModelInferRequest> requests = grpc.modelStreamInfer(new ClientResponseObserver<ModelInferRequest, ModelStreamInferResponse>() {
            @Override
            public void beforeStart(ClientCallStreamObserver<ModelInferRequest> c) {
                call[0] = c;
            }

            @Override
            public void onNext(ModelStreamInferResponse r) {
                long now = System.nanoTime();
                if (!r.getErrorMessage().isEmpty()) {
                    end.completeExceptionally(new IllegalStateException("gRPC " + model + ": " + r.getErrorMessage()));
                    return;
                }
                if (r.getInferResponse().getOutputsCount() == 0) {
                    return;
                }
                times.add(now);
                if (times.size() == stopAfter) {
                    closedAtMicros[0] = wallMicros();
                    call[0].cancel("the client goes away", null);
                    end.complete(null);
                }
            }

            @Override
            public void onError(Throwable t) {
                end.completeExceptionally(t);
            }

            @Override
            public void onCompleted() {
                end.complete(null);
            }
        });
        requests.onNext(ModelInferRequest.newBuilder().setModelName(model).addInputs(ModelInferRequest.InferInputTensor.newBuilder()
                .setName("text_input").setDatatype("BYTES").addShape(1)
                .setContents(InferTensorContents.newBuilder().addBytesContents(ByteString.copyFromUtf8(prompt)))).build());
        if (stopAfter <= 0) {
            requests.onCompleted(); // half-close: the server ends the stream when the request's responses are done
        }
        end.get(120, TimeUnit.SECONDS);
        return times.stream().mapToLong(Long::longValue).toArray();
    }

    // ---- figures ----

    /** p50, p99, max, min (nearest rank). */
    static double[] stats(double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        return new double[] {rank(s, 0.50), rank(s, 0.99), s[s.length - 1], s[0]};
    }

    static double rank(double[] sorted, double q) {
        return sorted[Math.max(0, (int) Math.ceil(q * sorted.length) - 1)];
    }

    static String loadavg() {
        try {
            String[] f = Files.readString(Path.of("/proc/loadavg")).split(" ");
            return f[0] + " " + f[1] + " " + f[2];
        } catch (IOException e) {
            return "?";
        }
    }
}
