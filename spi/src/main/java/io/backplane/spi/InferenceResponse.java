package io.backplane.spi;

import static java.util.Objects.requireNonNull;

import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * One response to a request: output tensors, or an error. Immutable.
 *
 * <p>A backend builds responses with {@link #of(List)} or {@link #error(BackplaneException)};
 * the core stamps the model name, version and request id before a client sees them (a backend
 * cannot: the stamp is not part of this type's API).
 */
public final class InferenceResponse {
    private final String modelName;
    private final long modelVersion;
    private final String requestId;
    private final List<Tensor> outputs;
    private final Map<String, Object> parameters;
    private final @Nullable BackplaneException error;

    private InferenceResponse(String modelName, long modelVersion, String requestId, List<Tensor> outputs,
            Map<String, ?> parameters, @Nullable BackplaneException error) {
        this.modelName = requireNonNull(modelName, "modelName is null");
        this.modelVersion = modelVersion;
        this.requestId = requireNonNull(requestId, "requestId is null");
        this.outputs = List.copyOf(outputs);
        this.parameters = Parameters.copy(parameters, "response");
        this.error = error;
        if (error != null && !outputs.isEmpty()) {
            throw new IllegalArgumentException("an error response carries no outputs");
        }
    }

    /** A successful response with these outputs. */
    public static InferenceResponse of(List<Tensor> outputs) {
        return new InferenceResponse("", 0, "", outputs, Map.of(), null);
    }

    /** A successful response with these outputs and response parameters. */
    public static InferenceResponse of(List<Tensor> outputs, Map<String, ?> parameters) {
        return new InferenceResponse("", 0, "", outputs, parameters, null);
    }

    /** An error response. */
    public static InferenceResponse error(BackplaneException error) {
        return new InferenceResponse("", 0, "", List.of(), Map.of(), requireNonNull(error, "error is null"));
    }

    /** This response addressed to a model version and request id; reached by hosts through {@link io.backplane.spi.host.HostResponses}. */
    private InferenceResponse stamped(String model, long version, String id) {
        return new InferenceResponse(model, version, id, outputs, parameters, error);
    }

    public String modelName() {
        return modelName;
    }

    public long modelVersion() {
        return modelVersion;
    }

    /** The client's request id, echoed. */
    public String requestId() {
        return requestId;
    }

    public List<Tensor> outputs() {
        return outputs;
    }

    /** The output named {@code name}, or null. */
    public @Nullable Tensor output(String name) {
        for (Tensor t : outputs) {
            if (t.name().equals(name)) {
                return t;
            }
        }
        return null;
    }

    public Map<String, Object> parameters() {
        return parameters;
    }

    /** The error, or null for a successful response. */
    public @Nullable BackplaneException error() {
        return error;
    }

    public boolean isError() {
        return error != null;
    }

    @Override
    public String toString() {
        return "InferenceResponse[" + modelName + ":" + modelVersion + (requestId.isEmpty() ? "" : ", id=" + requestId)
                + (error != null ? ", error=" + error.code() + ": " + error.getMessage() : ", outputs=" + outputs) + "]";
    }
}
