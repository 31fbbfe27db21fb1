package io.backplane.spi.host;

import static java.util.Objects.requireNonNull;

import java.util.Map;
import java.util.TreeMap;
import org.jspecify.annotations.Nullable;

/**
 * What a load may replace, as Triton's repository extension lets a client do
 * ({@code load_model(config=…, files=…)}): a model config and the model's files.
 *
 * <ul>
 *   <li>{@code config} only: the model loads from its repository folder with this config instead
 *       of its {@code config.pbtxt}.
 *   <li>{@code config} and {@code files}: the model loads from a private temporary folder holding
 *       only these files and the config, whether or not the repository has the model; the host
 *       removes the folder when the model unloads, is reloaded or the host closes.
 * </ul>
 *
 * @param config a model config in Triton's JSON form (the protobuf JSON mapping of
 *     {@code model_config.proto}, as {@code GET …/config} answers it), or null
 * @param files path inside the model folder (e.g. {@code 1/model.onnx}, Triton's
 *     {@code file:1/model.onnx} without the prefix) → content; the arrays are not copied and must
 *     not change afterwards
 */
public record LoadOverride(@Nullable String config, Map<String, byte[]> files) {
    /** No override: the model loads from the repository as it is. */
    public static final LoadOverride NONE = new LoadOverride(null, Map.of());

    public LoadOverride {
        requireNonNull(files, "files is null");
        files = java.util.Collections.unmodifiableMap(new TreeMap<>(files));
    }

    /** Whether nothing is overridden. */
    public boolean isEmpty() {
        return config == null && files.isEmpty();
    }

    /** The total size of the files, in bytes. */
    public long fileBytes() {
        long n = 0;
        for (byte[] b : files.values()) {
            n += b.length;
        }
        return n;
    }
}
