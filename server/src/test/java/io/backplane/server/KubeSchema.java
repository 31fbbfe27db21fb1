package io.backplane.server;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;

/**
 * A small structural schema, enough to check a Kubernetes manifest the way the API server checks a
 * custom resource against its CRD's OpenAPI schema: the type of every value (string, integer,
 * boolean, int-or-string, object, list, map), required fields, allowed values, and unknown fields,
 * which the API server refuses under kubectl's default strict field validation wherever the schema
 * has no {@code x-kubernetes-preserve-unknown-fields} (KServe's ServingRuntime CRD has none).
 *
 * <p>{@link #SERVING_RUNTIME} encodes, in our own words, the part of KServe's
 * {@code serving.kserve.io/v1alpha1} ServingRuntime that {@code deploy/kserve/servingruntime.yaml}
 * uses or may reasonably grow into, with the Kubernetes {@code Container} inside it. A field the CRD
 * has but this encoding does not describe is {@link NotEncoded}: the check refuses it and says so,
 * so a manifest never passes on a part nobody checked. Where Kubernetes' own pod validation (run when
 * KServe creates the Deployment) is stricter than the CRD's schema — enum values such as
 * {@code imagePullPolicy}, names that must be DNS labels, port ranges — the encoding follows the pod
 * validation, since the manifest must pass both.
 */
final class KubeSchema {
    private KubeSchema() {
    }

    /** A schema node. */
    sealed interface Schema permits Str, Int, Bool, IntOrString, Obj, Arr, MapOf, NotEncoded {
    }

    /** A string; {@code allowed} non-empty restricts it to those values, {@code pattern} (when not null) to a form. */
    record Str(Set<String> allowed, @Nullable Pattern pattern, String form) implements Schema {
    }

    /** An integer within [min, max] (YAML must write it unquoted: {@code "8080"} is a string). */
    record Int(long min, long max) implements Schema {
    }

    /** {@code true} or {@code false}. */
    record Bool() implements Schema {
    }

    /** Kubernetes' int-or-string (a port number or a port name, a resource quantity); {@code pattern} checks both forms. */
    record IntOrString(@Nullable Pattern pattern, String form) implements Schema {
    }

    /** An object with these fields only (unknown ones are errors) and these required ones. */
    record Obj(Map<String, Schema> fields, Set<String> required) implements Schema {
    }

    /** A list of {@code items}, at least {@code minItems} long. */
    record Arr(Schema items, int minItems) implements Schema {
    }

    /** A map from any string key to {@code values} (the CRD's {@code additionalProperties}). */
    record MapOf(Schema values) implements Schema {
    }

    /** A field KServe's CRD has that this encoding does not describe: using it fails the check until someone encodes it. */
    record NotEncoded(String what) implements Schema {
    }

    // ---- builders ----

    static Str str() {
        return new Str(Set.of(), null, "");
    }

    static Str oneOf(String... values) {
        return new Str(Set.of(values), null, "");
    }

    static Str matching(String regex, String form) {
        return new Str(Set.of(), Pattern.compile(regex), form);
    }

    static final long INT32_MAX = Integer.MAX_VALUE;
    static final long INT64_MAX = Long.MAX_VALUE;

    static Arr listOf(Schema items) {
        return new Arr(items, 0);
    }

    /** Fields given as name, schema, name, schema...; a name ending in {@code !} is required. */
    static Obj obj(Object... nameThenSchema) {
        Map<String, Schema> fields = new LinkedHashMap<>();
        List<String> required = new ArrayList<>();
        for (int i = 0; i < nameThenSchema.length; i += 2) {
            String name = (String) nameThenSchema[i];
            if (name.endsWith("!")) {
                name = name.substring(0, name.length() - 1);
                required.add(name);
            }
            fields.put(name, (Schema) nameThenSchema[i + 1]);
        }
        return new Obj(Map.copyOf(fields), Set.copyOf(required));
    }

    // ---- Kubernetes forms (pod validation) ----

    /** RFC 1123 label: a container name, a namespace. */
    static final Str DNS_LABEL = matching("[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", "a DNS-1123 label (lower-case letters, digits, '-', at most 63)");
    /** RFC 1123 subdomain: an object name. */
    static final Str DNS_SUBDOMAIN = matching("(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
            "a DNS-1123 subdomain (lower-case letters, digits, '-', '.', at most 253)");
    /** A port number or an IANA service name (what a probe's {@code port} may be). */
    static final IntOrString PORT = new IntOrString(Pattern.compile("[1-9][0-9]{0,4}|(?=.{1,15}$)[a-z0-9]+(-[a-z0-9]+)*"),
            "a port number 1-65535 or a port name");
    /** A resource quantity ({@code 1}, {@code 500m}, {@code 2Gi}, {@code 1e3}). */
    static final IntOrString QUANTITY = new IntOrString(Pattern.compile("[+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(([KMGTPE]i)|[numkMGTPE]|[eE][+-]?[0-9]+)?"),
            "a resource quantity such as 1, 500m or 2Gi");

    static final Obj EXEC = obj("command", listOf(str()));
    static final Obj HTTP_GET = obj("path", str(), "port!", PORT, "host", str(), "scheme", oneOf("HTTP", "HTTPS"),
            "httpHeaders", listOf(obj("name!", str(), "value!", str())));
    static final Obj TCP_SOCKET = obj("port!", PORT, "host", str());

    static final Obj PROBE = obj(
            "exec", EXEC,
            "httpGet", HTTP_GET,
            "tcpSocket", TCP_SOCKET,
            "grpc", obj("port!", new Int(1, 65535), "service", str()),
            "initialDelaySeconds", new Int(0, INT32_MAX),
            "periodSeconds", new Int(0, INT32_MAX),
            "timeoutSeconds", new Int(0, INT32_MAX),
            "successThreshold", new Int(0, INT32_MAX),
            "failureThreshold", new Int(0, INT32_MAX),
            "terminationGracePeriodSeconds", new Int(1, INT64_MAX));

    static final Obj LIFECYCLE_HANDLER = obj("exec", EXEC, "httpGet", HTTP_GET, "tcpSocket", TCP_SOCKET,
            "sleep", obj("seconds!", new Int(0, INT64_MAX)));

    static final Obj SECURITY_CONTEXT = obj(
            "allowPrivilegeEscalation", new Bool(),
            "privileged", new Bool(),
            "readOnlyRootFilesystem", new Bool(),
            "runAsNonRoot", new Bool(),
            "runAsUser", new Int(0, INT64_MAX),
            "runAsGroup", new Int(0, INT64_MAX),
            "procMount", oneOf("Default", "Unmasked"),
            "capabilities", obj("add", listOf(str()), "drop", listOf(str())),
            "seccompProfile", obj("type!", oneOf("RuntimeDefault", "Localhost", "Unconfined"), "localhostProfile", str()),
            "appArmorProfile", obj("type!", oneOf("RuntimeDefault", "Localhost", "Unconfined"), "localhostProfile", str()),
            "seLinuxOptions", new NotEncoded("SELinuxOptions"),
            "windowsOptions", new NotEncoded("WindowsSecurityContextOptions"));

    /** Kubernetes' core/v1 Container, every field the API knows (those not encoded here say so). */
    static final Obj CONTAINER = obj(
            "name!", DNS_LABEL,
            "image", str(),
            "command", listOf(str()),
            "args", listOf(str()),
            "workingDir", str(),
            "env", listOf(obj("name!", str(), "value", str(), "valueFrom", new NotEncoded("EnvVarSource"))),
            "envFrom", new NotEncoded("EnvFromSource"),
            "ports", listOf(obj(
                    "containerPort!", new Int(1, 65535),
                    "name", matching("(?=.{1,15}$)[a-z0-9]+(-[a-z0-9]+)*", "an IANA service name (lower-case, at most 15)"),
                    "protocol", oneOf("TCP", "UDP", "SCTP"),
                    "hostPort", new Int(1, 65535),
                    "hostIP", str())),
            "resources", obj("limits", new MapOf(QUANTITY), "requests", new MapOf(QUANTITY), "claims", new NotEncoded("ResourceClaim")),
            "resizePolicy", new NotEncoded("ContainerResizePolicy"),
            "restartPolicy", oneOf("Always"),
            "restartPolicyRules", new NotEncoded("ContainerRestartRule"),
            "volumeMounts", listOf(obj("name!", str(), "mountPath!", str(), "readOnly", new Bool(), "subPath", str(), "subPathExpr", str(),
                    "mountPropagation", oneOf("None", "HostToContainer", "Bidirectional"),
                    "recursiveReadOnly", oneOf("Disabled", "IfPossible", "Enabled"))),
            "volumeDevices", new NotEncoded("VolumeDevice"),
            "livenessProbe", PROBE,
            "readinessProbe", PROBE,
            "startupProbe", PROBE,
            "lifecycle", obj("postStart", LIFECYCLE_HANDLER, "preStop", LIFECYCLE_HANDLER, "stopSignal", str()),
            "terminationMessagePath", str(),
            "terminationMessagePolicy", oneOf("File", "FallbackToLogsOnError"),
            "imagePullPolicy", oneOf("Always", "Never", "IfNotPresent"),
            "securityContext", SECURITY_CONTEXT,
            "stdin", new Bool(),
            "stdinOnce", new Bool(),
            "tty", new Bool());

    /** KServe's protocol names (its {@code InferenceServiceProtocol} constants); the CRD types them as plain strings. */
    static final Set<String> KSERVE_PROTOCOLS = Set.of("v1", "v2", "grpc-v1", "grpc-v2");

    static final Obj SERVING_RUNTIME_SPEC = obj(
            "supportedModelFormats", listOf(obj(
                    "name!", str(),
                    // KServe matches it against the InferenceService's modelFormat.version: "major", "major.minor" or "major.minor.patch"
                    "version", matching("[0-9]+(\\.[0-9]+){0,2}", "\"major\", \"major.minor\" or \"major.minor.patch\""),
                    "autoSelect", new Bool(),
                    "priority", new Int(1, INT32_MAX))),
            "multiModel", new Bool(),
            "disabled", new Bool(),
            "protocolVersions", listOf(new Str(KSERVE_PROTOCOLS, null, "")),
            "workerSpec", new NotEncoded("WorkerSpec"),
            "containers!", new Arr(CONTAINER, 1),
            "volumes", new NotEncoded("Volume"),
            "nodeSelector", new MapOf(str()),
            "affinity", new NotEncoded("Affinity"),
            "tolerations", new NotEncoded("Toleration"),
            "labels", new MapOf(str()),
            "annotations", new MapOf(str()),
            "imagePullSecrets", listOf(obj("name", str())),
            "hostIPC", new Bool(),
            "schedulerName", str(),
            "resourceClaims", new NotEncoded("PodResourceClaim"),
            "grpcEndpoint", str(),
            "grpcDataEndpoint", str(),
            "httpDataEndpoint", str(),
            "replicas", new Int(0, 65535),
            "storageHelper", obj("disabled", new Bool()),
            "builtInAdapter", new NotEncoded("BuiltInAdapter"));

    static final Obj OBJECT_META = obj(
            "name!", DNS_SUBDOMAIN,
            "namespace", DNS_LABEL,
            "labels", new MapOf(str()),
            "annotations", new MapOf(str()),
            "generateName", new NotEncoded("generateName"),
            "finalizers", new NotEncoded("finalizers"),
            "ownerReferences", new NotEncoded("OwnerReference"));

    /** A namespaced ServingRuntime or a ClusterServingRuntime (the same spec) of {@code serving.kserve.io/v1alpha1}. */
    static final Obj SERVING_RUNTIME = obj(
            "apiVersion!", oneOf("serving.kserve.io/v1alpha1"),
            "kind!", oneOf("ServingRuntime", "ClusterServingRuntime"),
            "metadata!", OBJECT_META,
            "spec!", SERVING_RUNTIME_SPEC);

    // ---- the check ----

    /** Every way {@code node} breaks {@code schema}, each naming the path, the value and what was expected; empty when it conforms. */
    static List<String> violations(JsonNode node, Schema schema) {
        List<String> out = new ArrayList<>();
        check(node, schema, "", out);
        return out;
    }

    private static void check(JsonNode node, Schema schema, String path, List<String> out) {
        String where = path.isEmpty() ? "(root)" : path;
        switch (schema) {
            case Str s -> {
                if (!node.isTextual()) {
                    out.add(where + ": " + describe(node) + " is not a string" + (node.isNumber() || node.isBoolean() ? " (quote it in YAML)" : ""));
                } else if (!s.allowed().isEmpty() && !s.allowed().contains(node.textValue())) {
                    out.add(where + ": '" + node.textValue() + "' is not one of " + s.allowed().stream().sorted().toList());
                } else if (s.pattern() != null && !s.pattern().matcher(node.textValue()).matches()) {
                    out.add(where + ": '" + node.textValue() + "' is not " + s.form());
                }
            }
            case Int i -> {
                if (!node.isIntegralNumber()) {
                    out.add(where + ": " + describe(node) + " is not an integer" + (node.isTextual() ? " (write it unquoted in YAML)" : ""));
                } else if (!node.canConvertToLong() || node.longValue() < i.min() || node.longValue() > i.max()) {
                    out.add(where + ": " + node.asText() + " is outside " + i.min() + ".." + i.max());
                }
            }
            case Bool b -> {
                if (!node.isBoolean()) {
                    out.add(where + ": " + describe(node) + " is not a boolean (true or false)");
                }
            }
            case IntOrString ios -> {
                if (!node.isTextual() && !node.isIntegralNumber()) {
                    out.add(where + ": " + describe(node) + " is neither an integer nor a string");
                } else if (ios.pattern() != null && !ios.pattern().matcher(node.asText()).matches()) {
                    out.add(where + ": '" + node.asText() + "' is not " + ios.form());
                }
            }
            case Arr a -> {
                if (!node.isArray()) {
                    out.add(where + ": " + describe(node) + " is not a list");
                    return;
                }
                if (node.size() < a.minItems()) {
                    out.add(where + ": needs at least " + a.minItems() + " item(s), has " + node.size());
                }
                for (int k = 0; k < node.size(); k++) {
                    check(node.get(k), a.items(), path + "[" + k + "]", out);
                }
            }
            case MapOf m -> {
                if (!node.isObject()) {
                    out.add(where + ": " + describe(node) + " is not a map");
                    return;
                }
                for (Map.Entry<String, JsonNode> e : node.properties()) {
                    check(e.getValue(), m.values(), path + "['" + e.getKey() + "']", out);
                }
            }
            case Obj o -> {
                if (!node.isObject()) {
                    out.add(where + ": " + describe(node) + " is not an object");
                    return;
                }
                for (String r : o.required().stream().sorted().toList()) {
                    if (!node.has(r) || node.get(r).isNull()) {
                        out.add(where + ": required field '" + r + "' is missing");
                    }
                }
                for (Map.Entry<String, JsonNode> e : node.properties()) {
                    String child = path.isEmpty() ? e.getKey() : path + "." + e.getKey();
                    Schema s = o.fields().get(e.getKey());
                    if (s == null) {
                        out.add(child + ": unknown field (known here: " + o.fields().keySet().stream().sorted().toList() + ")");
                    } else {
                        check(e.getValue(), s, child, out);
                    }
                }
            }
            case NotEncoded n -> out.add(where + ": a " + n.what() + " field, which KServe's CRD allows but this check does not encode yet;"
                    + " encode it in KubeSchema from KServe's CRD before using it");
        }
    }

    private static String describe(JsonNode node) {
        if (node.isTextual()) {
            return "'" + node.textValue() + "'";
        }
        if (node.isObject()) {
            return "an object";
        }
        if (node.isArray()) {
            return "a list";
        }
        return node.isNull() ? "null" : node.toString();
    }
}
