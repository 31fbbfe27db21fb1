package io.backplane.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.core.JacksonException;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.dataformat.yaml.YAMLMapper;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import picocli.CommandLine;

/**
 * {@code deploy/kserve/servingruntime.yaml} is a ServingRuntime KServe accepts and a container
 * {@code backplane serve} runs as the manifest says. No cluster runs here, so the test checks what
 * the API server, KServe and the kubelet would check, in our own encoding of their rules:
 * <ul>
 *   <li>the fields, types, required fields and allowed values of KServe's ServingRuntime CRD
 *       ({@code serving.kserve.io/v1alpha1}) and of Kubernetes' Container inside it, unknown fields
 *       refused ({@link KubeSchema});</li>
 *   <li>KServe's and Knative's rules on the container: it is named {@code kserve-container} (KServe
 *       merges the InferenceService's predictor into that container), and it sets nothing Knative
 *       refuses, since one runtime serves both of KServe's deployment modes; one handler per probe;</li>
 *   <li>Backplane's side: the args are options the real {@code serve} command parses (picocli, in
 *       process, nothing started); the frontends listen where the protocols, the probes and the
 *       Prometheus annotations say; the probes use the health endpoints; the drain fits in the
 *       default grace period; a non-root security context matches the image's numeric user.</li>
 * </ul>
 * Each rule is shown to fail on a broken copy of the manifest ({@link #brokenCopy_isRefused}).
 */
class ServingRuntimeManifestTest {
    private static final Path REPO = repositoryRoot();
    private static final Path MANIFEST = REPO.resolve("deploy/kserve/servingruntime.yaml");
    private static final Path DOCKERFILE = REPO.resolve("deploy/Dockerfile");

    /** KServe mounts the storageUri's download here ({@code DefaultModelLocalMountPath}). */
    static final String KSERVE_MODEL_DIR = "/mnt/models";
    /** The container port KServe sends REST traffic to when the predictor declares none. */
    static final int KSERVE_HTTP_PORT = 8080;
    /** The name of the container KServe merges the InferenceService's predictor into. */
    static final String KSERVE_CONTAINER = "kserve-container";
    /** Kubernetes' default terminationGracePeriodSeconds; a ServingRuntime cannot change the pod's. */
    static final int DEFAULT_GRACE_SECONDS = 30;
    /** What the drain leaves of the grace period for the rest of the stop (the JVM's exit, a slow kubelet). */
    static final int GRACE_MARGIN_SECONDS = 5;
    /** Container fields Knative's serving webhook refuses (KServe's Serverless mode). */
    static final Set<String> KNATIVE_DISALLOWED = Set.of("lifecycle", "stdin", "stdinOnce", "tty", "volumeDevices");

    private static final YAMLMapper YAML = YAMLMapper.builder().enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION).build();

    @TempDir
    Path dir;

    private static Path repositoryRoot() {
        for (Path p = Path.of("").toAbsolutePath(); p != null; p = p.getParent()) {
            if (Files.isRegularFile(p.resolve("deploy/kserve/servingruntime.yaml"))) {
                return p;
            }
        }
        throw new IllegalStateException("deploy/kserve/servingruntime.yaml not found above " + Path.of("").toAbsolutePath()
                + "; run the test from the repository (./mvnw -pl server ...)");
    }

    private static String manifest() throws IOException {
        return Files.readString(MANIFEST, StandardCharsets.UTF_8);
    }

    @Test
    void manifest_conformsToKServeKubernetesAndServe() throws IOException {
        List<String> problems = problems(manifest());
        assertTrue(problems.isEmpty(), MANIFEST + ":\n  " + String.join("\n  ", problems));
    }

    @Test
    void manifest_serveOptions_asDocumented() throws IOException {
        JsonNode c = YAML.readTree(manifest()).path("spec").path("containers").get(0);
        ServeCommand serve = parseServe(args(c), new ArrayList<>());
        assertEquals(List.of(Path.of(KSERVE_MODEL_DIR)), serve.modelRepositories);
        assertEquals(KSERVE_HTTP_PORT, serve.httpPort);
        assertEquals(9000, serve.grpcPort); // docs/server.md and docs/deploy.md: grpc-v2 predictors declare h2c 9000
        assertEquals(8002, serve.metricsPort);
        assertEquals(-1, serve.openaiPort);
        assertTrue(serve.strictReadiness, "the readiness probe relies on strict readiness");
    }

    static Stream<Arguments> brokenCopies() {
        return Stream.of(
                // the CRD's schema
                Arguments.of("a protocol KServe does not know", "    - grpc-v2\n", "    - grpc-v3\n", "spec.protocolVersions[1]: 'grpc-v3' is not one of"),
                Arguments.of("protocolVersions as a string", "  protocolVersions:\n    - v2\n    - grpc-v2\n", "  protocolVersions: v2\n",
                        "spec.protocolVersions: 'v2' is not a list"),
                Arguments.of("an unknown spec field", "  protocolVersions:", "  protocolVersion:", "spec.protocolVersion: unknown field"),
                Arguments.of("an unknown container field", "      args:", "      argz:", "spec.containers[0].argz: unknown field"),
                Arguments.of("an unknown probe field", "        periodSeconds: 10\n", "        periodSecs: 10\n",
                        "spec.containers[0].livenessProbe.periodSecs: unknown field"),
                Arguments.of("a model format version as a number", "      version: \"1\"", "      version: 1",
                        "spec.supportedModelFormats[0].version: 1 is not a string (quote it in YAML)"),
                Arguments.of("autoSelect as a string", "      autoSelect: true", "      autoSelect: \"yes\"",
                        "spec.supportedModelFormats[0].autoSelect: 'yes' is not a boolean"),
                Arguments.of("a probe period as a string", "        periodSeconds: 10\n", "        periodSeconds: \"10\"\n",
                        "spec.containers[0].livenessProbe.periodSeconds: '10' is not an integer"),
                Arguments.of("a priority below 1", "      autoSelect: true\n    - name: onnx", "      autoSelect: true\n      priority: 0\n    - name: onnx",
                        "spec.supportedModelFormats[0].priority: 0 is outside 1.."),
                Arguments.of("a container without a name", "    - name: kserve-container\n", "    - image-name: kserve-container\n",
                        "spec.containers[0]: required field 'name' is missing"),
                Arguments.of("no containers", "  containers:\n", "  runtimes:\n", "spec: required field 'containers' is missing"),
                Arguments.of("an annotation value as a number", "prometheus.kserve.io/port: \"8002\"", "prometheus.kserve.io/port: 8002",
                        "spec.annotations['prometheus.kserve.io/port']: 8002 is not a string"),
                Arguments.of("a bad quantity", "memory: 2Gi\n        limits", "memory: 2GB\n        limits",
                        "spec.containers[0].resources.requests['memory']: '2GB' is not a resource quantity"),
                Arguments.of("a wrong API version", "serving.kserve.io/v1alpha1", "serving.kserve.io/v1beta1", "apiVersion: 'serving.kserve.io/v1beta1' is not one of"),
                Arguments.of("a duplicate key", "  name: backplane\n", "  name: backplane\n  name: triton\n", "Duplicate field 'name'"),
                Arguments.of("a field this check does not encode", "  containers:\n", "  volumes:\n    - name: shm\n  containers:\n",
                        "spec.volumes: a Volume field, which KServe's CRD allows but this check does not encode yet"),
                // KServe, Knative and Kubernetes rules
                Arguments.of("a container KServe does not merge the predictor into", "- name: kserve-container", "- name: backplane",
                        "no container is named 'kserve-container'"),
                Arguments.of("a lifecycle hook Knative refuses", "      args:\n", "      lifecycle:\n        preStop:\n          sleep:\n            seconds: 5\n      args:\n",
                        "Knative refuses 'lifecycle'"),
                Arguments.of("a probe with two handlers", "          path: /v2/health/ready\n          port: 8080\n",
                        "          path: /v2/health/ready\n          port: 8080\n        tcpSocket:\n          port: 8080\n",
                        "spec.containers[0].readinessProbe: 2 handlers (httpGet, tcpSocket); Kubernetes allows exactly one"),
                // backplane serve
                Arguments.of("an option serve does not know", "--http-port=8080", "--http-prot=8080", "Unknown option: '--http-prot=8080'"),
                Arguments.of("an option value serve refuses", "--exit-timeout-secs=25", "--exit-timeout-secs=soon",
                        "Invalid value for option '--exit-timeout-secs': 'soon' is not a number of seconds"),
                Arguments.of("a command instead of the image's entry point", "      args:\n", "      command:\n        - java\n      args:\n",
                        "sets a command"),
                Arguments.of("no serve", "        - serve\n", "", "args start with 'serve'"),
                Arguments.of("the models elsewhere", "--model-repository=/mnt/models", "--model-repository=/models",
                        "--model-repository does not include /mnt/models"),
                Arguments.of("REST on another port", "--http-port=8080", "--http-port=8000", "REST (protocol v2) on 8000, not KServe's 8080"),
                Arguments.of("gRPC off while grpc-v2 is offered", "--grpc-port=9000", "--grpc-port=-1", "grpc-v2 is offered but the grpc frontend is off"),
                Arguments.of("two frontends on one port", "--openai-port=-1", "--openai-port=9000", "port 9000 is used by grpc and openai"),
                Arguments.of("metrics elsewhere than the annotation says", "prometheus.kserve.io/port: \"8002\"", "prometheus.kserve.io/port: \"8003\"",
                        "prometheus.kserve.io/port is 8003 but the metrics frontend listens on 8002"),
                Arguments.of("metrics path", "prometheus.kserve.io/path: /metrics", "prometheus.kserve.io/path: /stats",
                        "prometheus.kserve.io/path is '/stats'"),
                Arguments.of("metrics off", "--metrics-port=8002", "--metrics-port=-1", "the metrics frontend listens on -1"),
                Arguments.of("readiness on the liveness endpoint", "          path: /v2/health/ready\n", "          path: /v2/health/live\n",
                        "readinessProbe asks /v2/health/live, not /v2/health/ready"),
                Arguments.of("a probe on the metrics port", "          path: /v2/health/ready\n          port: 8080\n", "          path: /v2/health/ready\n          port: 8002\n",
                        "readinessProbe probes port 8002, where the http frontend does not listen (it is on 8080)"),
                Arguments.of("liveness without a startup probe", "      startupProbe:\n        httpGet:\n          path: /v2/health/live\n          port: 8080\n        periodSeconds: 5\n        failureThreshold: 120\n",
                        "", "a livenessProbe without a startupProbe"),
                Arguments.of("a drain longer than the grace period", "--exit-timeout-secs=25", "--exit-timeout-secs=30",
                        "--exit-timeout-secs=30 leaves less than 5 s of Kubernetes' default 30 s grace period"),
                Arguments.of("root", "        runAsNonRoot: true\n", "        runAsNonRoot: true\n        runAsUser: 0\n", "runAsUser 0 with runAsNonRoot"),
                Arguments.of("a user the image does not run as", "        runAsNonRoot: true\n", "        runAsNonRoot: true\n        runAsUser: 1000\n",
                        "runAsUser 1000 is not the image's user 10001"));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("brokenCopies")
    void brokenCopy_isRefused(String what, String from, String to, String expected) throws IOException {
        String original = manifest();
        assertTrue(original.contains(from), "the manifest no longer contains <" + from + ">: update this case (" + what + ")");
        String broken = original.replaceFirst(Pattern.quote(from), Matcher.quoteReplacement(to));
        List<String> problems = problems(broken);
        assertTrue(problems.stream().anyMatch(p -> p.contains(expected)),
                what + ": expected a problem containing <" + expected + ">, got:\n  " + String.join("\n  ", problems));
    }

    /**
     * The Deployment the Kubernetes docs give (a {@code kubectl apply -f - <<'YAML'} block of
     * docs/deploy.md): its container is a valid
     * Kubernetes Container, its args are real serve options, and its ports, probes, Prometheus
     * annotations and grace period agree with them.
     */
    @Test
    void docsDeployment_conformsToKubernetesAndServe() throws IOException {
        List<JsonNode> deployments = new ArrayList<>();
        for (JsonNode d : heredocYaml(Files.readString(REPO.resolve("docs/deploy.md"), StandardCharsets.UTF_8))) {
            if ("Deployment".equals(d.path("kind").asText())) {
                deployments.add(d);
            }
        }
        assertTrue(!deployments.isEmpty(), "no Deployment in a kubectl apply block of docs/deploy.md");
        List<String> problems = new ArrayList<>();
        for (JsonNode d : deployments) {
            problems.addAll(deploymentProblems(d));
        }
        assertTrue(problems.isEmpty(), "the docs' Deployment:\n  " + String.join("\n  ", problems));
    }

    @Test
    void docsDeployment_brokenCopy_isRefused() throws IOException {
        Path file = REPO.resolve("docs/deploy.md");
        String text = Files.readString(file, StandardCharsets.UTF_8);
        Map<String, String[]> cases = new LinkedHashMap<>();
        cases.put("a grace period the drain does not fit", new String[] {"terminationGracePeriodSeconds: 40     # >= preStop", "terminationGracePeriodSeconds: 30     # >= preStop",
                "terminationGracePeriodSeconds 30 is less than preStop 5 s + --exit-timeout-secs 30 + 5 s"});
        cases.put("a probe on a port name no port has", new String[] {"httpGet: {path: /v2/health/ready, port: http}",
                "httpGet: {path: /v2/health/ready, port: web}", "readinessProbe probes port web, where the http frontend does not listen"});
        cases.put("an unknown serve option", new String[] {"--exit-timeout-secs=30]", "--exit-timeout=30]", "Unknown option: '--exit-timeout=30'"});
        cases.put("an unknown container field", new String[] {"          volumeMounts:", "          volumeMount:", "volumeMount: unknown field"});
        cases.put("metrics annotation elsewhere", new String[] {"prometheus.io/port: \"8002\"\n        prometheus.io/path",
                "prometheus.io/port: \"9090\"\n        prometheus.io/path", "prometheus.io/port is 9090 but the metrics frontend listens on 8002"});
        for (Map.Entry<String, String[]> c : cases.entrySet()) {
            String[] v = c.getValue();
            assertTrue(text.contains(v[0]), file + " no longer contains <" + v[0] + ">: update this case (" + c.getKey() + ")");
            List<String> problems = new ArrayList<>();
            for (JsonNode d : heredocYaml(text.replaceFirst(Pattern.quote(v[0]), Matcher.quoteReplacement(v[1])))) {
                if ("Deployment".equals(d.path("kind").asText())) {
                    problems.addAll(deploymentProblems(d));
                }
            }
            assertTrue(problems.stream().anyMatch(p -> p.contains(v[2])), c.getKey() + ": expected <" + v[2] + "> in\n  " + String.join("\n  ", problems));
        }
    }

    /** The YAML documents of every {@code <<'YAML'} here-document in a Markdown text. */
    private static List<JsonNode> heredocYaml(String markdown) throws IOException {
        List<JsonNode> out = new ArrayList<>();
        StringBuilder block = null;
        for (String line : markdown.split("\n", -1)) {
            if (block == null) {
                if (line.contains("<<'YAML'")) {
                    block = new StringBuilder();
                }
            } else if (line.strip().equals("YAML")) {
                try (var it = YAML.readerFor(JsonNode.class).<JsonNode>readValues(block.toString())) {
                    while (it.hasNext()) {
                        out.add(it.next());
                    }
                }
                block = null;
            } else {
                block.append(line).append('\n');
            }
        }
        return out;
    }

    private List<String> deploymentProblems(JsonNode d) {
        List<String> out = new ArrayList<>();
        JsonNode pod = d.path("spec").path("template");
        JsonNode containers = pod.path("spec").path("containers");
        if (containers.size() != 1) {
            out.add("the docs' Deployment has " + containers.size() + " containers; this check reads one");
            return out;
        }
        JsonNode c = containers.get(0);
        String at = "Deployment " + d.path("metadata").path("name").asText() + ".containers[0]";
        KubeSchema.violations(c, KubeSchema.CONTAINER).forEach(v -> out.add(at + "." + v));
        if (!out.isEmpty()) {
            return out;
        }
        probeHandlerRules(c, at, out);
        ServeCommand serve;
        List<String> args = args(c);
        try {
            if (args.isEmpty() || !"serve".equals(args.get(0))) {
                out.add(at + ".args: the args start with 'serve'");
                return out;
            }
            serve = parseServe(args, out);
        } catch (CommandLine.ParameterException e) {
            out.add(at + ".args: backplane serve refuses them: " + e.getMessage());
            return out;
        }
        Map<String, Integer> ports = new LinkedHashMap<>();
        ports.put("http", serve.allowHttp ? serve.httpPort : -1);
        ports.put("grpc", serve.allowGrpc ? serve.grpcPort : -1);
        ports.put("metrics", serve.allowMetrics ? serve.metricsPort : -1);
        ports.put("openai", serve.allowOpenai ? serve.openaiPort : -1);
        Set<Integer> listening = new HashSet<>(ports.values());
        for (JsonNode p : c.path("ports")) {
            if (!listening.contains(p.path("containerPort").intValue())) {
                out.add(at + ".ports: " + p.path("containerPort").intValue() + " is no port serve listens on " + ports);
            }
        }
        probe(c, "startupProbe", "/v2/health/live", ports, at, out);
        probe(c, "livenessProbe", "/v2/health/live", ports, at, out);
        probe(c, "readinessProbe", "/v2/health/ready", ports, at, out);
        if (c.has("livenessProbe") && !c.has("startupProbe")) {
            out.add(at + ": a livenessProbe without a startupProbe");
        }
        JsonNode annotations = pod.path("metadata").path("annotations");
        if (annotations.has("prometheus.io/port") && !annotations.get("prometheus.io/port").asText().equals(String.valueOf(ports.get("metrics")))) {
            out.add("the pod's prometheus.io/port is " + annotations.get("prometheus.io/port").asText() + " but the metrics frontend listens on "
                    + ports.get("metrics"));
        }
        int grace = pod.path("spec").path("terminationGracePeriodSeconds").asInt(DEFAULT_GRACE_SECONDS);
        int pause = c.path("lifecycle").path("preStop").path("sleep").path("seconds").asInt(0);
        if (grace < pause + serve.exitTimeoutSecs + GRACE_MARGIN_SECONDS) {
            out.add("terminationGracePeriodSeconds " + grace + " is less than preStop " + pause + " s + --exit-timeout-secs " + serve.exitTimeoutSecs
                    + " + " + GRACE_MARGIN_SECONDS + " s");
        }
        return out;
    }

    // ---- the check ----

    /** Every problem of a ServingRuntime manifest, each naming where it is and what is wrong; empty when the manifest is fine. */
    List<String> problems(String yaml) {
        JsonNode root;
        try {
            root = YAML.readTree(yaml);
        } catch (JacksonException e) {
            return List.of("not YAML Kubernetes reads: " + e.getOriginalMessage());
        }
        List<String> out = new ArrayList<>(KubeSchema.violations(root, KubeSchema.SERVING_RUNTIME));
        if (!out.isEmpty()) {
            return out; // the rules below read fields whose types the schema vouches for
        }
        JsonNode spec = root.path("spec");
        JsonNode container = null;
        Set<String> names = new HashSet<>();
        for (JsonNode c : spec.path("containers")) {
            if (!names.add(c.path("name").asText())) {
                out.add("spec.containers: two containers are named '" + c.path("name").asText() + "'");
            }
            if (KSERVE_CONTAINER.equals(c.path("name").asText())) {
                container = c;
            }
        }
        if (container == null) {
            out.add("spec.containers: no container is named '" + KSERVE_CONTAINER + "', the one KServe merges the InferenceService's predictor into");
            return out;
        }
        String at = "spec.containers[" + indexOf(spec.path("containers"), container) + "]";
        kubernetesRules(container, at, out);
        serveRules(spec, container, at, out);
        return out;
    }

    private static int indexOf(JsonNode list, JsonNode item) {
        for (int i = 0; i < list.size(); i++) {
            if (list.get(i) == item) {
                return i;
            }
        }
        return -1;
    }

    private static void kubernetesRules(JsonNode c, String at, List<String> out) {
        for (String field : KNATIVE_DISALLOWED.stream().sorted().toList()) {
            if (c.has(field)) {
                out.add(at + "." + field + ": Knative refuses '" + field + "' in a container, so KServe's Serverless mode could not use this runtime;"
                        + " set it on the InferenceService's predictor in RawDeployment mode instead");
            }
        }
        probeHandlerRules(c, at, out);
    }

    private static void probeHandlerRules(JsonNode c, String at, List<String> out) {
        for (String probe : List.of("startupProbe", "livenessProbe", "readinessProbe")) {
            if (c.has(probe)) {
                List<String> handlers = new ArrayList<>();
                for (String h : List.of("exec", "httpGet", "tcpSocket", "grpc")) {
                    if (c.get(probe).has(h)) {
                        handlers.add(h);
                    }
                }
                if (handlers.size() != 1) {
                    out.add(at + "." + probe + ": " + handlers.size() + " handlers " + (handlers.isEmpty() ? "" : "(" + String.join(", ", handlers) + ")")
                            + "; Kubernetes allows exactly one");
                }
                if (!"readinessProbe".equals(probe) && c.get(probe).has("successThreshold") && c.get(probe).get("successThreshold").asInt() > 1) {
                    out.add(at + "." + probe + ".successThreshold: must be 1 for a " + probe + " (Kubernetes)");
                }
            }
        }
    }

    private void serveRules(JsonNode spec, JsonNode c, String at, List<String> out) {
        if (c.has("command")) {
            out.add(at + ".command: sets a command; leave it out so the image's entry point, bin/backplane, runs the args");
        }
        List<String> args = args(c);
        if (args.isEmpty() || !"serve".equals(args.get(0))) {
            out.add(at + ".args: the args start with 'serve' (bin/backplane's command), not " + (args.isEmpty() ? "nothing" : "'" + args.get(0) + "'"));
            return;
        }
        ServeCommand serve;
        try {
            serve = parseServe(args, out);
        } catch (CommandLine.ParameterException e) {
            out.add(at + ".args: backplane serve refuses them: " + e.getMessage());
            return;
        }
        if (!serve.modelRepositories.contains(Path.of(KSERVE_MODEL_DIR))) {
            out.add(at + ".args: --model-repository does not include " + KSERVE_MODEL_DIR + ", where KServe puts the storageUri's models");
        }
        Map<String, Integer> ports = new LinkedHashMap<>();
        ports.put("http", serve.allowHttp ? serve.httpPort : -1);
        ports.put("grpc", serve.allowGrpc ? serve.grpcPort : -1);
        ports.put("metrics", serve.allowMetrics ? serve.metricsPort : -1);
        ports.put("openai", serve.allowOpenai ? serve.openaiPort : -1);
        Map<Integer, String> byPort = new HashMap<>();
        for (Map.Entry<String, Integer> e : ports.entrySet()) {
            if (e.getValue() > 0) {
                String other = byPort.putIfAbsent(e.getValue(), e.getKey());
                if (other != null) {
                    out.add(at + ".args: port " + e.getValue() + " is used by " + other + " and " + e.getKey() + "; give one of them another port or -1");
                }
            }
        }
        Set<String> protocols = new HashSet<>();
        spec.path("protocolVersions").forEach(p -> protocols.add(p.asText()));
        if (protocols.contains("v2") && ports.get("http") != KSERVE_HTTP_PORT) {
            out.add(at + ".args: REST (protocol v2) on " + ports.get("http") + ", not KServe's " + KSERVE_HTTP_PORT + " (--http-port)");
        }
        if (protocols.contains("grpc-v2") && ports.get("grpc") <= 0) {
            out.add(at + ".args: grpc-v2 is offered but the grpc frontend is off (--grpc-port)");
        }
        if (protocols.contains("v1") || protocols.contains("grpc-v1")) {
            out.add("spec.protocolVersions: Backplane speaks the v2 protocols only, not " + protocols.stream().filter(p -> p.endsWith("v1")).sorted().toList());
        }
        JsonNode annotations = spec.path("annotations");
        if (annotations.has("prometheus.kserve.io/port")) {
            String port = annotations.get("prometheus.kserve.io/port").asText();
            if (!port.equals(String.valueOf(ports.get("metrics")))) {
                out.add("spec.annotations: prometheus.kserve.io/port is " + port + " but the metrics frontend listens on " + ports.get("metrics")
                        + " (--metrics-port)");
            }
            String path = annotations.path("prometheus.kserve.io/path").asText("/metrics");
            if (!"/metrics".equals(path)) {
                out.add("spec.annotations: prometheus.kserve.io/path is '" + path + "'; the metrics frontend serves /metrics");
            }
        }
        probe(c, "startupProbe", "/v2/health/live", ports, at, out);
        probe(c, "livenessProbe", "/v2/health/live", ports, at, out);
        probe(c, "readinessProbe", "/v2/health/ready", ports, at, out);
        if (c.has("livenessProbe") && !c.has("startupProbe")) {
            out.add(at + ": a livenessProbe without a startupProbe; the ports open only once the initial models are loaded, so a slow load"
                    + " would be restarted: add a startupProbe on /v2/health/live with room for the load");
        }
        if (serve.exitTimeoutSecs + GRACE_MARGIN_SECONDS > DEFAULT_GRACE_SECONDS) {
            out.add(at + ".args: --exit-timeout-secs=" + serve.exitTimeoutSecs + " leaves less than " + GRACE_MARGIN_SECONDS
                    + " s of Kubernetes' default " + DEFAULT_GRACE_SECONDS + " s grace period, which a ServingRuntime cannot change; give at most "
                    + (DEFAULT_GRACE_SECONDS - GRACE_MARGIN_SECONDS));
        }
        JsonNode sc = c.path("securityContext");
        if (sc.has("runAsUser")) {
            long user = sc.get("runAsUser").asLong();
            if (user == 0 && sc.path("runAsNonRoot").asBoolean(false)) {
                out.add(at + ".securityContext: runAsUser 0 with runAsNonRoot: true; the kubelet would refuse to start it");
            }
            String imageUser = imageUser();
            if (user != 0 && !String.valueOf(user).equals(imageUser)) {
                out.add(at + ".securityContext: runAsUser " + user + " is not the image's user " + imageUser + " (deploy/Dockerfile)");
            }
        }
        if (sc.path("runAsNonRoot").asBoolean(false) && !imageUser().matches("[1-9][0-9]*")) {
            out.add(at + ".securityContext: runAsNonRoot needs the image's USER to be a non-zero number, deploy/Dockerfile has '" + imageUser() + "'");
        }
    }

    private static void probe(JsonNode c, String name, String path, Map<String, Integer> ports, String at, List<String> out) {
        JsonNode p = c.path(name);
        if (p.has("httpGet")) {
            JsonNode get = p.get("httpGet");
            if (!path.equals(get.path("path").asText())) {
                out.add(at + "." + name + " asks " + get.path("path").asText("(no path)") + ", not " + path);
            }
            if (!get.path("scheme").asText("HTTP").equals("HTTP")) {
                out.add(at + "." + name + ": scheme " + get.get("scheme").asText() + "; the http frontend of this runtime speaks plain HTTP");
            }
            int port = port(c, get.get("port"));
            if (port != ports.get("http")) {
                out.add(at + "." + name + " probes port " + get.get("port").asText() + ", where the http frontend does not listen (it is on "
                        + ports.get("http") + ")");
            }
        } else if (p.has("grpc")) {
            if (p.get("grpc").get("port").asInt() != ports.get("grpc")) {
                out.add(at + "." + name + " probes gRPC port " + p.get("grpc").get("port").asInt() + ", where the grpc frontend does not listen (it is on "
                        + ports.get("grpc") + ")");
            }
            if ("livenessProbe".equals(name)) {
                out.add(at + ".livenessProbe: gRPC health reports readiness, so a gRPC liveness probe restarts a pod whose model is not ready;"
                        + " probe /v2/health/live over REST");
            }
        } else if (!p.isMissingNode()) {
            out.add(at + "." + name + ": use httpGet on " + path + " (or grpc for readiness), which answer Backplane's state; a port or a command does not");
        }
    }

    /** A probe's port: a number, or the name of one of the container's ports. */
    private static int port(JsonNode c, JsonNode port) {
        if (port.isIntegralNumber()) {
            return port.intValue();
        }
        for (JsonNode p : c.path("ports")) {
            if (port.asText().equals(p.path("name").asText())) {
                return p.path("containerPort").intValue();
            }
        }
        return -1;
    }

    private static List<String> args(JsonNode c) {
        List<String> args = new ArrayList<>();
        c.path("args").forEach(a -> args.add(a.asText()));
        return args;
    }

    /** The args as the real {@code backplane serve} parses them (nothing starts); throws picocli's ParameterException when it refuses them. */
    private ServeCommand parseServe(List<String> args, List<String> out) {
        StringWriter err = new StringWriter();
        CommandLine cl = Main.commandLine(dir, null, s -> {
            throw new AssertionError("no server may start in a manifest test");
        });
        cl.setErr(new PrintWriter(err, true));
        cl.parseArgs(args.toArray(String[]::new));
        if (!err.toString().isEmpty()) {
            out.add("backplane serve warned: " + err);
        }
        return cl.getSubcommands().get("serve").getCommand();
    }

    /** The USER of deploy/Dockerfile (its last one). */
    private static String imageUser() {
        try {
            String user = "root";
            for (String line : Files.readAllLines(DOCKERFILE, StandardCharsets.UTF_8)) {
                if (line.startsWith("USER ")) {
                    user = line.substring(5).strip();
                }
            }
            return user;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
