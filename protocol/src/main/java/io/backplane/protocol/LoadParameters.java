package io.backplane.protocol;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.host.LoadOverride;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * The parameters of a repository load request (Triton's repository extension), read the same way
 * by both frontends: {@code config} (a model config in Triton's JSON form, as a string) and
 * {@code file:<path>} (a model file: base64 text on REST, bytes on gRPC). Any other key is refused
 * with INVALID_ARGUMENT naming it.
 */
public final class LoadParameters {
    /** The config parameter. */
    public static final String CONFIG = "config";
    /** The prefix of a file parameter: {@code file:1/model.onnx}. */
    public static final String FILE_PREFIX = "file:";

    private final String model;
    private @Nullable String config;
    private final Map<String, byte[]> files = new LinkedHashMap<>();

    private LoadParameters(String model) {
        this.model = model;
    }

    /** Collects the parameters of a load of {@code model}. */
    public static LoadParameters of(String model) {
        return new LoadParameters(model);
    }

    /** Adds the parameter {@code key} whose value is text ({@code config}, or base64 content of a {@code file:} on REST). */
    public LoadParameters text(String key, String value) {
        if (key.equals(CONFIG)) {
            config = value;
        } else if (key.startsWith(FILE_PREFIX)) {
            try {
                files.put(key.substring(FILE_PREFIX.length()), Base64.getDecoder().decode(value));
            } catch (IllegalArgumentException e) {
                throw BackplaneException.invalid("load parameter '" + key + "' of model '" + model + "' is not base64: " + e.getMessage());
            }
        } else {
            throw unknown(key);
        }
        return this;
    }

    /** Adds the parameter {@code key} whose value is bytes (a {@code file:} on gRPC). */
    public LoadParameters bytes(String key, byte[] value) {
        if (!key.startsWith(FILE_PREFIX)) {
            throw key.equals(CONFIG) ? BackplaneException.invalid("load parameter 'config' of model '" + model
                    + "' must be a string (the model config as JSON), not bytes") : unknown(key);
        }
        files.put(key.substring(FILE_PREFIX.length()), value);
        return this;
    }

    /** Refuses parameter {@code key} whose value has the wrong type, {@code what} it was. */
    public BackplaneException wrongType(String key, String what) {
        if (!key.equals(CONFIG) && !key.startsWith(FILE_PREFIX)) {
            return unknown(key);
        }
        return BackplaneException.invalid("load parameter '" + key + "' of model '" + model + "' must be "
                + (key.equals(CONFIG) ? "a string (the model config as JSON)" : "the file's content") + ", not " + what);
    }

    /**
     * Refuses parameter {@code key} of the gRPC type {@code got} with Triton's sentence
     * ({@code invalid value type for load parameter '<key>', expected string_param.}) and then
     * what to send.
     */
    public BackplaneException wrongGrpcType(String key, String got) {
        if (!key.equals(CONFIG) && !key.startsWith(FILE_PREFIX)) {
            return unknown(key);
        }
        boolean config = key.equals(CONFIG);
        return BackplaneException.invalid("invalid value type for load parameter '" + key + "', expected " + (config ? "string_param" : "bytes_param")
                + ". (model '" + model + "': got " + got + "; send " + (config ? "the model config as JSON text" : "the file's content as bytes") + ")");
    }

    private BackplaneException unknown(String key) {
        return BackplaneException.invalid("unrecognized load parameter '" + key + "'. (model '" + model + "': a load takes '" + CONFIG
                + "' (a model config as JSON) and '" + FILE_PREFIX + "<version>/<file>' (model files))");
    }

    /** The override these parameters make. */
    public LoadOverride override() {
        return new LoadOverride(config, files);
    }
}
