package io.backplane.spi.host;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.RequestTrace;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * Starts request traces and holds the trace settings (Triton's trace extension: REST
 * {@code /v2/trace/setting}, {@code /v2/models/<m>/trace/setting}, gRPC {@code TraceSetting}).
 * The host that owns a tracing library implements it ({@code backplane serve} does, with
 * OpenTelemetry) and hands it to its frontends through {@link FrontendContext#tracer()}; the SPI
 * and the core know no tracing library. Thread-safe.
 */
public interface RequestTracer {
    /** Traces nothing and serves no settings (the frontends then do not serve the trace extension). */
    RequestTracer NONE = new RequestTracer() {
        @Override
        public RequestTrace start(String model, @Nullable String traceParent) {
            return RequestTrace.NONE;
        }

        @Override
        public boolean serves() {
            return false;
        }
    };

    /**
     * The trace of a request for {@code model} that just arrived, or {@link RequestTrace#NONE}
     * when the settings do not sample it.
     *
     * @param traceParent the W3C {@code traceparent} the client sent (REST header, gRPC
     *     metadata), or null
     */
    RequestTrace start(String model, @Nullable String traceParent);

    /** Whether this tracer serves the trace extension (its settings). */
    default boolean serves() {
        return true;
    }

    /**
     * The trace settings in force for {@code model} (empty: the global ones), by Triton's names
     * ({@code trace_level}, {@code trace_rate}, {@code trace_count}, {@code log_frequency},
     * {@code trace_file}, {@code trace_mode}), each a list of strings.
     */
    default Map<String, List<String>> settings(String model) {
        throw new BackplaneException(ErrorCode.UNSUPPORTED, "this host does not trace requests (trace extension)");
    }

    /**
     * Changes settings for {@code model} (empty: the global ones); a null value clears a model's
     * own setting so the global one applies again. Returns the settings now in force.
     *
     * @throws BackplaneException INVALID_ARGUMENT naming a bad setting or value; nothing changes then
     */
    default Map<String, List<String>> update(String model, Map<String, @Nullable List<String>> changes) {
        throw new BackplaneException(ErrorCode.UNSUPPORTED, "this host does not trace requests (trace extension)");
    }
}
