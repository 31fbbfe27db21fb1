package io.backplane.core.config;

import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.TextFormat;
import com.google.protobuf.util.JsonFormat;
import io.backplane.spi.BackplaneException;

/**
 * A model config in Triton's JSON form (the protobuf JSON mapping of {@code model_config.proto},
 * as a repository-extension load sends it) turned into config.pbtxt text, through the generated
 * message: an unknown field is an error naming it. {@link ModelConfigParser} then checks the text
 * as it checks a file.
 */
public final class JsonConfig {
    private JsonConfig() {
    }

    /**
     * @param what names the value in errors, e.g. "load parameter 'config' of model 'm'"
     * @throws BackplaneException INVALID_ARGUMENT when {@code json} is not such a config
     */
    public static String toText(String json, String what) {
        io.backplane.protocol.inference.ModelConfig.Builder b = io.backplane.protocol.inference.ModelConfig.newBuilder();
        try {
            JsonFormat.parser().merge(json, b);
        } catch (InvalidProtocolBufferException | RuntimeException e) {
            throw BackplaneException.invalid(what + " is not a model config in Triton's JSON form: " + e.getMessage());
        }
        return TextFormat.printer().printToString(b.build());
    }
}
