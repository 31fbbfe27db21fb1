package io.backplane.benchmarks.peers;

import ai.djl.engine.Engine;
import ai.djl.inference.Predictor;
import ai.djl.modality.Input;
import ai.djl.modality.Output;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ZooModel;
import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtSession;
import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.Tensor;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import static io.backplane.benchmarks.peers.RealModelsBenchmark.*;
import static io.backplane.benchmarks.peers.RealModelsTable.*;

/**
 * The peers of {@link RealModelsBenchmark}, one class each: ONNX Runtime called directly, the
 * embedded host, {@code backplane serve} over REST, DJL's ONNX Runtime, PyTorch and Python engines,
 * and gunicorn/Flask or Ray Serve in a child process. Each starts its model, gives callers and says
 * how it was set up (the table prints it beside the figures).
 */
final class RealModelPeers {
    private RealModelPeers() {
    }


    /** ONNX Runtime's Java API called directly: one session, the floor. */
    static final class OrtPeer implements Peer {
        private final OrtEnvironment env = OrtEnvironment.getEnvironment();
        private final OrtSession session;
        private final Model model;
        private final int threads;

        private OrtPeer(Ctx ctx, Model m) throws Exception {
            this.model = m;
            this.threads = ctx.threads;
            try (OrtSession.SessionOptions o = new OrtSession.SessionOptions()) {
                o.setIntraOpNumThreads(ctx.threads);
                o.setInterOpNumThreads(1);
                o.setExecutionMode(OrtSession.SessionOptions.ExecutionMode.SEQUENTIAL);
                o.setOptimizationLevel(OrtSession.SessionOptions.OptLevel.ALL_OPT);
                session = env.createSession(m.versionDir().resolve("model.onnx").toString(), o);
            }
        }

        static OrtPeer start(Ctx ctx, Model m) throws Exception {
            return new OrtPeer(ctx, m);
        }

        @Override
        public Caller caller() {
            return () -> {
                Map<String, OnnxTensor> in = new LinkedHashMap<>();
                try {
                    for (In i : model.inputs()) {
                        ByteBuffer b = i.direct();
                        in.put(i.name(), i.int64() ? OnnxTensor.createTensor(env, b.asLongBuffer(), i.shape())
                                : OnnxTensor.createTensor(env, b.asFloatBuffer(), i.shape()));
                    }
                    try (OrtSession.Result r = session.run(in)) {
                        OnnxTensor first = (OnnxTensor) r.get(0);
                        for (int k = 1; k < r.size(); k++) {
                            ((OnnxTensor) r.get(k)).getFloatBuffer(); // every output read out, as the others do
                        }
                        var fb = first.getFloatBuffer();
                        float[] y = new float[fb.remaining()];
                        fb.get(y);
                        return y;
                    }
                } finally {
                    in.values().forEach(OnnxTensor::close);
                }
            };
        }

        @Override
        public String config() {
            return "ORT " + env.getVersion() + " Java API, 1 session shared by the callers, intra-op " + threads
                    + ", inter-op 1, sequential, ALL_OPT; inputs wrap direct buffers; no batcher";
        }

        @Override
        public void close() {
            try {
                session.close();
            } catch (ai.onnxruntime.OrtException e) {
                throw new IllegalStateException("closing the ORT session failed", e);
            }
        }
    }

    /** Backplane's embedded host: the ONNX backend or the Python backend (the zoo's model.py). */
    static final class HostPeer implements Peer {
        private final BackplaneHost host;
        private final Model model;
        private final String config;
        private final String configBatched;

        private HostPeer(BackplaneHost host, Model model, String config, String configBatched) {
            this.host = host;
            this.model = model;
            this.config = config;
            this.configBatched = configBatched;
        }

        static HostPeer start(Ctx ctx, Model m, boolean both) throws Exception {
            Path repo = repository(ctx, m, both);
            // the torch model's EXECUTION_ENV_PATH names the zoo's environment, outside this repository
            BackplaneHost host = BackplaneHost.builder().modelRepository(repo).modelControlMode(ModelControlMode.NONE)
                    .allowLinksOutsideRepository(true).build();
            String how = "embedded host, blocking infer().get()";
            return new HostPeer(host, m, backplaneConfig(ctx, m, false, how), backplaneConfig(ctx, m, true, how));
        }

        @Override
        public Caller caller() {
            return caller(false);
        }

        @Override
        public Caller caller(boolean batched) {
            String name = model.name() + (batched ? "_batched" : "");
            return () -> {
                InferenceRequest.Builder b = InferenceRequest.builder(name);
                for (In i : model.inputs()) {
                    b.input(Tensor.of(i.name(), i.int64() ? DataType.INT64 : DataType.FP32, i.shape(), i.segment()));
                }
                return host.infer(b.build()).get().output(model.outputs().getFirst()).toFloatArray();
            };
        }

        @Override
        public String config() {
            return config;
        }

        @Override
        public String config(boolean batched) {
            return batched ? configBatched : config;
        }

        @Override
        public void close() {
            host.close();
        }
    }

    static String backplaneConfig(Ctx ctx, Model m, boolean batching, String how) throws IOException {
        String backend = m.group().equals("bert_torch") ? "python backend (zoo's model.py), 1 instance, torch threads " + ctx.threads
                : torchScriptGroup(m.group()) ? "pytorch backend (zoo's model.pt; backends/pytorch/: DJL 0.36, libtorch 2.7.1), 1 instance, "
                        + "INTRA_OP_THREAD_COUNT " + ctx.threads + ", INTER_OP_THREAD_COUNT 1"
                : "onnxruntime backend, 1 instance, intra-op " + ctx.threads + ", inter-op 1, sequential, ALL";
        return how + "; " + backend + "; " + (batching ? batchingOf(m) : "no dynamic batching");
    }

    /** {@code backplane serve} in a child process, over REST with binary tensors (HTTP/1.1, one connection per caller). */
    static final class RestPeer implements Peer {
        private final Process process;
        private final Model model;
        private final int port;
        private final HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
        private final byte[] body;
        private final int headerLength;
        private final String config;
        private final String configBatched;
        private Load load;

        private RestPeer(Process process, Model model, int port, String config, String configBatched) {
            this.process = process;
            this.model = model;
            this.port = port;
            this.config = config;
            this.configBatched = configBatched;
            StringBuilder json = new StringBuilder("{\"inputs\":[");
            int size = 0;
            for (In i : model.inputs()) {
                json.append(size == 0 ? "" : ",").append("{\"name\":\"").append(i.name()).append("\",\"shape\":").append(Arrays.toString(i.shape()).replace(" ", ""))
                        .append(",\"datatype\":\"").append(i.int64() ? "INT64" : "FP32").append("\",\"parameters\":{\"binary_data_size\":")
                        .append(i.le().length).append("}}");
                size += i.le().length;
            }
            json.append("],\"outputs\":[");
            for (int k = 0; k < model.outputs().size(); k++) {
                json.append(k == 0 ? "" : ",").append("{\"name\":\"").append(model.outputs().get(k)).append("\",\"parameters\":{\"binary_data\":true}}");
            }
            json.append("]}");
            byte[] head = json.toString().getBytes(StandardCharsets.UTF_8);
            headerLength = head.length;
            ByteBuffer b = ByteBuffer.allocate(head.length + size).put(head);
            model.inputs().forEach(i -> b.put(i.le()));
            body = b.array();
        }

        static RestPeer start(Ctx ctx, Model m, boolean both) throws Exception {
            Path repo = repository(ctx, m, both);
            int port = freePort();
            List<String> cmd = new ArrayList<>();
            if (ctx.dist != null) {
                cmd.add(ctx.dist.resolve("bin/backplane").toString());
            } else {
                cmd.addAll(javaCommand());
                cmd.add("io.backplane.server.Main");
            }
            cmd.addAll(List.of("serve", "--model-repository", repo.toString(), "--model-control-mode", "explicit", "--http-port", Integer.toString(port),
                    "--http-address", "127.0.0.1", "--grpc-port", "-1", "--metrics-port", "-1", "--openai-port", "-1", "--allow-links-outside-repository"));
            Path log = ctx.work.resolve("serve-" + port + ".log");
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
            String how = "`backplane serve` (" + (ctx.dist != null ? ctx.dist.resolve("bin/backplane") : "child JVM of peers.jar") + "), REST binary tensors; client: a keep-alive HTTP/1.1 socket per caller, on its thread (as requests.Session or tritonclient.http)";
            RestPeer peer = new RestPeer(p, m, port, backplaneConfig(ctx, m, false, how), backplaneConfig(ctx, m, true, how));
            try {
                URI live = URI.create("http://127.0.0.1:" + port + "/v2/health/live");
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
                while (true) {
                    try {
                        if (peer.client.send(HttpRequest.newBuilder(live).build(), HttpResponse.BodyHandlers.discarding()).statusCode() == 200) {
                            break;
                        }
                    } catch (IOException e) {
                        // not listening yet
                    }
                    if (!p.isAlive() || System.nanoTime() > deadline) {
                        throw new IllegalStateException("backplane serve did not start on port " + port + ": " + tail(log));
                    }
                    Thread.sleep(50);
                }
                long before = treeRssKb(p.pid());
                long t0 = System.nanoTime();
                peer.loadModel(m.name(), log);
                try (Caller c = peer.caller()) {
                    c.call();
                }
                peer.load = new Load((System.nanoTime() - t0) / 1e6, before, treeRssKb(p.pid()));
                if (both) {
                    peer.loadModel(m.name() + "_batched", log); // after the figures of the first: its load and RSS are the first's
                }
                return peer;
            } catch (Exception e) {
                peer.close();
                throw e;
            }
        }

        private void loadModel(String name, Path log) throws Exception {
            HttpResponse<String> r = client.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/v2/repository/models/" + name + "/load"))
                    .timeout(Duration.ofSeconds(300)).POST(HttpRequest.BodyPublishers.ofString("{}")).build(), HttpResponse.BodyHandlers.ofString());
            if (r.statusCode() != 200) {
                throw new IllegalStateException("loading " + name + " answered " + r.statusCode() + " " + r.body() + "; " + tail(log));
            }
        }

        @Override
        public Caller caller() {
            return caller(false);
        }

        @Override
        public String config(boolean batched) {
            return batched ? configBatched : config;
        }

        @Override
        public Caller caller(boolean batched) {
            String path = "/v2/models/" + model.name() + (batched ? "_batched" : "") + "/infer";
            Map<String, String> headers = Map.of("Inference-Header-Content-Length", Integer.toString(headerLength), "Content-Type", "application/octet-stream");
            Http1Connection connection = new Http1Connection(URI.create("http://127.0.0.1:" + port), Duration.ofSeconds(300));
            return new Caller() {
                @Override
                public float[] call() throws Exception {
                    Http1Connection.Response r = connection.post(path, headers, body);
                    if (r.status() != 200) {
                        throw new IOException("backplane serve answered " + r.status() + ": " + new String(r.body(), StandardCharsets.UTF_8));
                    }
                    String length = r.header("Inference-Header-Content-Length");
                    if (length == null) {
                        throw new IOException("the answer has no binary outputs: " + new String(r.body(), StandardCharsets.UTF_8));
                    }
                    int head = Integer.parseInt(length);
                    String json = new String(r.body(), 0, head, StandardCharsets.UTF_8);
                    Matcher size = Pattern.compile("\"binary_data_size\":(\\d+)").matcher(json);
                    if (!size.find()) {
                        throw new IOException("no binary_data_size in " + json);
                    }
                    return floats(Arrays.copyOfRange(r.body(), head, head + Integer.parseInt(size.group(1))));
                }

                @Override
                public void close() {
                    connection.close();
                }
            };
        }

        @Override
        public String config() {
            return config;
        }

        @Override
        public Load load() {
            return load;
        }

        @Override
        public void close() {
            client.close();
            stopTree(process);
        }
    }

    /** DJL's ONNX Runtime engine: one model (ORT session), a predictor per caller. */
    static final class DjlOrtPeer implements Peer {
        private final ZooModel<NDList, NDList> model;
        private final Model m;
        private final int threads;

        private DjlOrtPeer(ZooModel<NDList, NDList> model, Model m, int threads) {
            this.model = model;
            this.m = m;
            this.threads = threads;
        }

        static DjlOrtPeer start(Ctx ctx, Model m) throws Exception {
            Criteria<NDList, NDList> c = Criteria.builder().setTypes(NDList.class, NDList.class).optEngine("OnnxRuntime").optModelPath(m.versionDir())
                    .optModelName("model").optOption("intraOpNumThreads", Integer.toString(ctx.threads)).optOption("interOpNumThreads", "1")
                    .optOption("executionMode", "SEQUENTIAL").optOption("optLevel", "ALL_OPT").build();
            return new DjlOrtPeer(c.loadModel(), m, ctx.threads);
        }

        @Override
        public Caller caller() {
            return ndCaller(model, m);
        }

        @Override
        public String config() {
            return "DJL " + Engine.getDjlVersion() + " OnnxRuntime engine (ORT " + OrtEnvironment.getEnvironment().getVersion() + "), 1 model, a predictor per caller, intra-op "
                    + threads + ", inter-op 1, sequential, ALL_OPT; no batcher";
        }

        @Override
        public void close() {
            model.close();
        }
    }

    /** A DJL predictor fed the model's inputs as NDArrays made from direct buffers on a per-call sub-manager. */
    static Caller ndCaller(ZooModel<NDList, NDList> zoo, Model m) {
        Predictor<NDList, NDList> p = zoo.newPredictor();
        return new Caller() {
            @Override
            public float[] call() throws Exception {
                try (NDManager nd = zoo.getNDManager().newSubManager()) {
                    NDList in = new NDList();
                    for (In i : m.inputs()) {
                        NDArray a = nd.create(i.direct(), new Shape(i.shape()), i.int64() ? ai.djl.ndarray.types.DataType.INT64 : ai.djl.ndarray.types.DataType.FLOAT32);
                        a.setName(i.name());
                        in.add(a);
                    }
                    NDList out = p.predict(in);
                    float[] y = out.get(0).toFloatArray();
                    for (int k = 1; k < out.size(); k++) {
                        out.get(k).toByteArray(); // every output read out, as the others do
                    }
                    out.close();
                    return y;
                }
            }

            @Override
            public void close() {
                p.close();
            }
        };
    }

    /**
     * DJL's PyTorch engine (libtorch from Maven Central) on a TorchScript trace of the zoo's encoder,
     * or, for the TorchScript models ({@code *_pt}), on the zoo's own {@code model.pt}: the file the
     * pytorch backend serves.
     */
    static final class DjlPtPeer implements Peer {
        private final ZooModel<NDList, NDList> model;
        private final Model m;
        private final int threads;

        private DjlPtPeer(ZooModel<NDList, NDList> model, Model m, int threads) {
            this.model = model;
            this.m = m;
            this.threads = threads;
        }

        static DjlPtPeer start(Ctx ctx, Model m) throws Exception {
            Path ts = torchScriptGroup(m.group()) ? m.versionDir().resolve("model.pt") : torchScript(ctx, m);
            Criteria<NDList, NDList> c = Criteria.builder().setTypes(NDList.class, NDList.class).optEngine("PyTorch").optModelPath(ts).build();
            return new DjlPtPeer(c.loadModel(), m, ctx.threads);
        }

        @Override
        public Caller caller() {
            return ndCaller(model, m);
        }

        @Override
        public String config() {
            return "DJL " + Engine.getDjlVersion() + " PyTorch engine (libtorch " + Engine.getEngine("PyTorch").getVersion()
                    + " from pytorch-native-cpu), " + (torchScriptGroup(m.group()) ? "the zoo's model.pt" : "TorchScript trace of the zoo's weights")
                    + ", a predictor per caller, intra-op " + threads + ", inter-op 1; no batcher";
        }

        @Override
        public void close() {
            model.close();
        }
    }

    /** The TorchScript trace of the zoo's encoder, made once per run with the model environment's torch. */
    static synchronized Path torchScript(Ctx ctx, Model m) throws Exception {
        Path cached = ctx.torchScripts.get(m.name());
        if (cached != null) {
            return cached;
        }
        Path dir = Files.createDirectories(ctx.zoo.toAbsolutePath().resolve(".torchscript"));
        Path out = dir.resolve(m.name() + ".pt");
        Path weights = m.versionDir().resolve("weights.pt");
        if (!Files.exists(out) || Files.getLastModifiedTime(out).compareTo(Files.getLastModifiedTime(weights)) < 0) {
            Path scripts = Files.createTempDirectory(ctx.work, "ts");
            resource("real/encoder_peer.py", scripts);
            Path script = resource("real/torchscript.py", scripts);
            Path log = scripts.resolve("torchscript.log");
            Process p = new ProcessBuilder(ctx.python, script.toString(), m.versionDir().toString(), out.toString()).directory(scripts.toFile())
                    .redirectErrorStream(true).redirectOutput(log.toFile()).start();
            if (!p.waitFor(600, TimeUnit.SECONDS) || p.exitValue() != 0) {
                p.destroyForcibly();
                throw new IllegalStateException("the TorchScript export failed: " + tail(log));
            }
        }
        ctx.torchScripts.put(m.name(), out);
        return out;
    }

    /** A folder with the Python peers' files and a settings.json naming the zoo's weights and our threads. */
    static Path pythonDir(Ctx ctx, Model m, String... resources) throws IOException {
        Path dir = Files.createTempDirectory(ctx.work, "py");
        resource("real/encoder_peer.py", dir);
        for (String r : resources) {
            resource("real/" + r, dir);
        }
        Files.writeString(dir.resolve("settings.json"), "{\"version_dir\": \"" + m.versionDir() + "\", \"threads\": " + ctx.threads + "}\n");
        return dir;
    }

    /**
     * DJL's Python engine, the same encoder through encoder_peer.py. DJL starts one Python process per predictor; one per
     * caller would be 8 or 32 instances where every other peer has one, so the callers share one predictor (one process)
     * and take turns on it, as requests take turns on one instance elsewhere.
     */
    static final class DjlPythonPeer implements Peer {
        private final ZooModel<Input, Output> zoo;
        private final Predictor<Input, Output> predictor;
        private final Model m;
        private final int threads;

        private DjlPythonPeer(ZooModel<Input, Output> zoo, Model m, int threads) {
            this.zoo = zoo;
            this.predictor = zoo.newPredictor();
            this.m = m;
            this.threads = threads;
        }

        static DjlPythonPeer start(Ctx ctx, Model m) throws Exception {
            Path dir = pythonDir(ctx, m, "djl_encoder.py");
            Files.move(dir.resolve("djl_encoder.py"), dir.resolve("model.py"));
            Criteria<Input, Output> c = Criteria.builder().setTypes(Input.class, Output.class).optModelPath(dir).optEngine("Python")
                    .optOption("pythonExecutable", ctx.python).optOption("predict_timeout", "600").optOption("model_loading_timeout", "600").build();
            return new DjlPythonPeer(c.loadModel(), m, ctx.threads);
        }

        @Override
        public Caller caller() {
            byte[] body = wireBody(m);
            return () -> {
                Input in = new Input();
                in.add(body);
                byte[] answer;
                synchronized (predictor) {
                    answer = predictor.predict(in).getData().getAsBytes();
                }
                return firstOutput(m, answer);
            };
        }

        @Override
        public String config() {
            return "DJL " + Engine.getDjlVersion() + " Python engine, 1 predictor (= 1 Python process) the callers take turns on, torch threads " + threads
                    + "; no batcher";
        }

        @Override
        public void close() {
            predictor.close();
            zoo.close();
        }
    }

    /** input_ids then attention_mask, the wire body of the Python peers. */
    static byte[] wireBody(Model m) {
        ByteBuffer b = ByteBuffer.allocate(m.inputs().stream().mapToInt(i -> i.le().length).sum());
        m.inputs().forEach(i -> b.put(i.le()));
        return b.array();
    }

    /** last_hidden_state out of the wire answer (it is followed by pooler_output). */
    static float[] firstOutput(Model m, byte[] answer) throws IOException {
        long seq = m.inputs().getFirst().shape()[1];
        int hidden = Math.toIntExact(answer.length / 4 / (seq + 1));
        int n = Math.toIntExact(seq * hidden * 4);
        if ((long) hidden * (seq + 1) * 4 != answer.length) {
            throw new IOException("the answer has " + answer.length + " bytes, not [1," + seq + ",H] + [1,H] floats");
        }
        return floats(Arrays.copyOf(answer, n));
    }

    /** gunicorn/Flask or Ray Serve in a child process, the same encoder over HTTP/1.1. */
    static final class HttpPythonPeer implements Peer {
        private final Process process;
        private final Model m;
        private final URI uri;
        private final HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
        private final byte[] body;
        private final String config;
        private Load load;

        private HttpPythonPeer(Process process, Model m, URI uri, String config) {
            this.process = process;
            this.m = m;
            this.uri = uri;
            this.config = config;
            this.body = wireBody(m);
        }

        static HttpPythonPeer flask(Ctx ctx, Model m) throws Exception {
            Path dir = pythonDir(ctx, m, "flask_encoder.py");
            int port = freePort();
            ProcessBuilder pb = new ProcessBuilder(ctx.python, "-m", "gunicorn", "-w", "1", "--threads", "1", "-b", "127.0.0.1:" + port, "--chdir", dir.toString(),
                    "--timeout", "600", "--log-level", "warning", "flask_encoder:app");
            pb.environment().put("PEER_SETTINGS", dir.resolve("settings.json").toString());
            return started(ctx, pb, m, port, "gunicorn " + version(ctx, "gunicorn") + "/Flask " + version(ctx, "flask") + ", 1 sync worker, torch threads "
                    + ctx.threads + "; no batcher", "flask", null);
        }

        static HttpPythonPeer ray(Ctx ctx, Model m) throws Exception {
            Path dir = pythonDir(ctx, m, "ray_encoder.py");
            int port = freePort();
            ProcessBuilder pb = new ProcessBuilder(ctx.python, dir.resolve("ray_encoder.py").toString(), dir.resolve("settings.json").toString(),
                    Integer.toString(port), "1").directory(dir.toFile());
            pb.environment().put("RAY_USAGE_STATS_ENABLED", "0");
            return started(ctx, pb, m, port, "Ray Serve " + version(ctx, "ray") + " (ray + serve's needs by name: ray[serve] is not installable from the "
                    + "local index), 1 replica, default max_ongoing_requests, async handler, torch threads " + ctx.threads
                    + "; no batching (@serve.batch not used)", "ray", "READY");
        }

        private static HttpPythonPeer started(Ctx ctx, ProcessBuilder pb, Model m, int port, String config, String what, String readyLine) throws Exception {
            Path log = ctx.work.resolve(what + "-" + port + ".log");
            long t0 = System.nanoTime();
            Process p = pb.redirectErrorStream(true).redirectOutput(log.toFile()).start();
            HttpPythonPeer peer = new HttpPythonPeer(p, m, URI.create("http://127.0.0.1:" + port + "/infer"), config);
            try {
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(300);
                while (true) {
                    if (readyLine == null || Files.readString(log).contains(readyLine)) {
                        try (Caller c = peer.caller()) {
                            c.call();
                            break;
                        } catch (IOException e) {
                            // not serving yet
                        }
                    }
                    if (!p.isAlive() || System.nanoTime() > deadline) {
                        throw new IllegalStateException(what + " did not start on port " + port + ": " + tail(log));
                    }
                    Thread.sleep(100);
                }
                peer.load = new Load((System.nanoTime() - t0) / 1e6, 0, treeRssKb(p.pid()));
                return peer;
            } catch (Exception e) {
                peer.close();
                throw e;
            }
        }

        @Override
        public Caller caller() {
            Http1Connection connection = new Http1Connection(uri, Duration.ofSeconds(600));
            String path = uri.getRawPath() == null || uri.getRawPath().isEmpty() ? "/" : uri.getRawPath();
            return new Caller() {
                @Override
                public float[] call() throws Exception {
                    Http1Connection.Response r = connection.post(path, Map.of(), body);
                    if (r.status() != 200) {
                        throw new IOException(uri + " answered " + r.status() + ": " + new String(r.body(), StandardCharsets.UTF_8));
                    }
                    return firstOutput(m, r.body());
                }

                @Override
                public void close() {
                    connection.close();
                }
            };
        }

        @Override
        public String config() {
            return config;
        }

        @Override
        public Load load() {
            return load;
        }

        @Override
        public void close() {
            client.close();
            if (process.isAlive()) {
                try {
                    process.getOutputStream().close(); // ray_encoder.py stops when its stdin closes
                } catch (IOException e) {
                    // already closed
                }
            }
            stopTree(process);
        }
    }

    /** SIGTERM to a child, then SIGKILL to whatever of it and its descendants is left after 30 s. */
    static void stopTree(Process p) {
        List<ProcessHandle> kids = p.descendants().toList();
        try {
            if (!p.waitFor(2, TimeUnit.SECONDS)) {
                p.destroy();
                if (!p.waitFor(30, TimeUnit.SECONDS)) {
                    p.destroyForcibly().waitFor();
                }
            }
        } catch (InterruptedException e) {
            p.destroyForcibly();
            Thread.currentThread().interrupt();
        }
        for (ProcessHandle k : kids) {
            if (k.isAlive()) {
                k.destroy();
            }
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        for (ProcessHandle k : kids) {
            try {
                k.onExit().get(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            } catch (Exception e) {
                k.destroyForcibly();
            }
        }
    }
}
