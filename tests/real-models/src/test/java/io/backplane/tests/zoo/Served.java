package io.backplane.tests.zoo;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.protobuf.ByteString;
import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelInferResponse;
import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.FrontendContext;
import io.backplane.spi.host.InferenceService;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A real host on a repository with the REST, gRPC and OpenAI frontends on ephemeral loopback ports, and the
 * tests' own small clients of both (the Open Inference Protocol, as any client speaks it).
 */
final class Served implements AutoCloseable {
    private static final ObjectMapper JSON = new ObjectMapper();

    final BackplaneHost host;
    private final List<Frontend> frontends;
    final String http;
    /** The OpenAI-compatible API's base URL ({@code http://127.0.0.1:<port>}). */
    final String openai;
    private final ManagedChannel channel;
    private final HttpClient client = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(30)).build();

    /** An input of a request: name, datatype (FP32 or INT64), shape and values (float[] or long[]). */
    record In(String name, String datatype, long[] shape, Object values) {
    }

    private Served(BackplaneHost host, List<Frontend> frontends, String http, String openai, ManagedChannel channel) {
        this.host = host;
        this.frontends = frontends;
        this.http = http;
        this.openai = openai;
        this.channel = channel;
    }

    static Served start(Path repository) throws Exception {
        return start(repository, Map.of());
    }

    /** As {@link #start(Path)}, with these options of the python backend (e.g. {@code python_interpreter}). */
    static Served start(Path repository, Map<String, String> pythonOptions) throws Exception {
        // Zoo.copy links the zoo's files in, and the torch model's EXECUTION_ENV_PATH names an environment outside the repository
        BackplaneHost.Builder builder = BackplaneHost.builder().modelRepository(repository).modelControlMode(ModelControlMode.NONE)
                .allowLinksOutsideRepository(true);
        pythonOptions.forEach((k, v) -> builder.backendOption("python", k, v));
        BackplaneHost host = builder.build();
        List<Frontend> started = new ArrayList<>();
        try {
            List<String> endpoints = new ArrayList<>();
            for (String name : List.of("http", "grpc", "openai")) {
                Frontend f = host.frontendFactories().get(name).create(context(host, Map.of("host", "127.0.0.1", "port", "0")));
                started.add(f);
                f.start();
                endpoints.add(f.endpoint().contains("://") ? f.endpoint() : "grpc://" + f.endpoint());
            }
            URI h = URI.create(endpoints.get(0));
            URI g = URI.create(endpoints.get(1));
            ManagedChannel channel = Grpc.newChannelBuilderForAddress(g.getHost(), g.getPort(), InsecureChannelCredentials.create()).build();
            URI o = URI.create(endpoints.get(2));
            return new Served(host, started, "http://" + h.getHost() + ":" + h.getPort(), "http://" + o.getHost() + ":" + o.getPort(), channel);
        } catch (Exception e) {
            for (Frontend f : started.reversed()) {
                try {
                    f.close();
                } catch (Exception suppressed) {
                    e.addSuppressed(suppressed);
                }
            }
            host.close();
            throw e;
        }
    }

    /** REST infer with JSON data; the outputs as float arrays by name (errors throw with the body). */
    Map<String, float[]> rest(String model, List<In> inputs) throws Exception {
        ObjectNode root = JSON.createObjectNode();
        ArrayNode ins = root.putArray("inputs");
        for (In in : inputs) {
            ObjectNode n = ins.addObject().put("name", in.name()).put("datatype", in.datatype());
            ArrayNode s = n.putArray("shape");
            for (long d : in.shape()) {
                s.add(d);
            }
            ArrayNode data = n.putArray("data");
            if (in.values() instanceof long[] v) {
                for (long x : v) {
                    data.add(x);
                }
            } else {
                for (float x : (float[]) in.values()) {
                    data.add(x);
                }
            }
        }
        HttpResponse<String> r = client.send(HttpRequest.newBuilder(URI.create(http + "/v2/models/" + model + "/infer"))
                .timeout(Duration.ofSeconds(120)).header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(root.toString())).build(), HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() != 200) {
            throw new IllegalStateException("REST " + model + " answered " + r.statusCode() + ": " + r.body());
        }
        Map<String, float[]> out = new LinkedHashMap<>();
        for (JsonNode o : JSON.readTree(r.body()).get("outputs")) {
            JsonNode data = o.get("data");
            float[] v = new float[data.size()];
            for (int i = 0; i < v.length; i++) {
                v[i] = (float) data.get(i).asDouble();
            }
            out.put(o.get("name").asText(), v);
        }
        return out;
    }

    /** gRPC ModelInfer with raw (little-endian) contents; the outputs as float arrays by name. */
    Map<String, float[]> grpc(String model, List<In> inputs) {
        ModelInferRequest.Builder b = ModelInferRequest.newBuilder().setModelName(model);
        for (In in : inputs) {
            ModelInferRequest.InferInputTensor.Builder t = ModelInferRequest.InferInputTensor.newBuilder().setName(in.name())
                    .setDatatype(in.datatype());
            for (long d : in.shape()) {
                t.addShape(d);
            }
            b.addInputs(t);
            ByteBuffer raw;
            if (in.values() instanceof long[] v) {
                raw = ByteBuffer.allocate(v.length * 8).order(ByteOrder.LITTLE_ENDIAN);
                raw.asLongBuffer().put(v);
            } else {
                float[] v = (float[]) in.values();
                raw = ByteBuffer.allocate(v.length * 4).order(ByteOrder.LITTLE_ENDIAN);
                raw.asFloatBuffer().put(v);
            }
            b.addRawInputContents(ByteString.copyFrom(raw.array()));
        }
        ModelInferResponse r = GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(120, TimeUnit.SECONDS).modelInfer(b.build());
        Map<String, float[]> out = new LinkedHashMap<>();
        for (int i = 0; i < r.getOutputsCount(); i++) {
            ByteBuffer raw = r.getRawOutputContents(i).asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
            float[] v = new float[raw.remaining() / 4];
            raw.asFloatBuffer().get(v);
            out.put(r.getOutputs(i).getName(), v);
        }
        return out;
    }

    /** {@code [inference_count, execution_count]} of the model's version 1 (REST statistics extension). */
    long[] counts(String model) throws Exception {
        HttpResponse<String> r = client.send(HttpRequest.newBuilder(URI.create(http + "/v2/models/" + model + "/stats")).timeout(Duration.ofSeconds(30))
                .GET().build(), HttpResponse.BodyHandlers.ofString());
        JsonNode s = JSON.readTree(r.body()).get("model_stats").get(0);
        return new long[] {s.get("inference_count").asLong(), s.get("execution_count").asLong()};
    }

    @Override
    public void close() {
        channel.shutdownNow();
        try {
            if (!channel.awaitTermination(30, TimeUnit.SECONDS)) {
                throw new IllegalStateException("the gRPC channel did not close");
            }
            for (Frontend f : frontends.reversed()) {
                f.close();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted closing", e);
        } catch (Exception e) {
            throw new IllegalStateException("a frontend failed to close", e);
        } finally {
            client.close();
            host.close();
        }
    }

    private static FrontendContext context(InferenceService service, Map<String, String> options) {
        return new FrontendContext() {
            @Override
            public InferenceService service() {
                return service;
            }

            @Override
            public Map<String, String> options() {
                return options;
            }
        };
    }
}
