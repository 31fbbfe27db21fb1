package com.example.textops;

import com.google.common.base.Ascii;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;

/**
 * One textops instance. For each request of the batch it sends exactly one FINAL: the result, or
 * an error for that request only. It checks cancellation first, and reports in a response
 * parameter which Guava it sees, to make class-loader isolation visible.
 */
final class TextOpsInstance implements ModelInstance {
    /** The response parameter naming the Guava version this plugin's class loader sees. */
    static final String GUAVA_PARAMETER = "textops.guava.version";
    static final String GUAVA_VERSION = guavaVersion();

    private final TextOp op;
    private final String prefix;

    TextOpsInstance(TextOp op, String prefix) {
        this.op = op;
        this.prefix = prefix;
    }

    @Override
    public void execute(List<ScheduledRequest> batch) {
        for (ScheduledRequest r : batch) {
            try {
                r.sender().sendFinal(answer(r));
            } catch (BackplaneException e) {
                r.sender().sendError(e); // this request only; the others of the batch go on
            }
        }
    }

    private InferenceResponse answer(ScheduledRequest r) {
        if (r.isCancelled()) {
            throw new BackplaneException(ErrorCode.CANCELLED, "request " + r.id() + " was cancelled before textops ran it");
        }
        if (Boolean.TRUE.equals(r.request().parameters().get("fail"))) {
            throw BackplaneException.invalid("request " + r.id() + " asked textops to fail (parameter fail=true)");
        }
        Tensor text = r.request().input("TEXT");
        if (text == null) {
            throw BackplaneException.invalid("textops needs a BYTES input named TEXT");
        }
        List<String> out = new ArrayList<>();
        for (String s : text.toStringList()) {
            out.add(prefix + op.apply(s));
        }
        Tensor result = Tensor.ofStrings("RESULT", text.shape(), out.toArray(String[]::new));
        return InferenceResponse.of(List.of(result), Map.of(GUAVA_PARAMETER, GUAVA_VERSION));
    }

    @Override
    public void close() {
        // nothing to release
    }

    private static String guavaVersion() {
        try (InputStream in = Ascii.class.getResourceAsStream("/META-INF/maven/com.google.guava/guava/pom.properties")) {
            if (in == null) {
                return "unknown";
            }
            Properties p = new Properties();
            p.load(in);
            return p.getProperty("version", "unknown");
        } catch (IOException e) {
            return "unknown";
        }
    }
}
