package io.backplane.plugin.http;

import com.fasterxml.jackson.databind.JsonNode;
import io.backplane.spi.BackplaneException;
import io.netty.buffer.ByteBuf;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpResponseStatus;
import java.util.List;

/**
 * The path shape both of Triton's shared-memory extensions share:
 * {@code /v2/<extension>[/region/<r>]/{status,register,unregister}}: status is a GET, the other
 * two are POSTs, register needs a region, and a missing region means every region. What a region
 * is and what register reads from the body belong to the subclass
 * ({@link SystemSharedMemoryHandler}, {@link CudaSharedMemoryHandler}).
 */
abstract class SharedMemoryRoute implements RestRoute {
    /** What the errors call a region: "shared-memory region" or "CUDA shared-memory region". */
    private final String what;

    SharedMemoryRoute(String what) {
        this.what = what;
    }

    @Override
    public void serve(RestCall call) {
        List<String> seg = call.segments();
        int n = seg.size();
        String region;
        if (n == 3) {
            region = null;
        } else if (n == 5 && seg.get(2).equals("region")) {
            region = seg.get(3);
        } else {
            throw call.notFound();
        }
        switch (seg.get(n - 1)) {
            case "status" -> {
                call.requireMethod(HttpMethod.GET);
                call.sendJson(status(region));
            }
            case "register" -> {
                call.requireMethod(HttpMethod.POST);
                if (region == null) {
                    throw call.notFound();
                }
                register(region, InferCodec.readJson(call.request().content()));
                call.sendEmpty(HttpResponseStatus.OK);
            }
            case "unregister" -> {
                call.requireMethod(HttpMethod.POST);
                unregister(region);
                call.sendEmpty(HttpResponseStatus.OK);
            }
            default -> throw call.notFound();
        }
    }

    /** The status body of {@code region}, or of every region where it is null. */
    abstract ByteBuf status(String region);

    /** Registers {@code region} as {@code body} describes it. */
    abstract void register(String region, JsonNode body);

    /** Unregisters {@code region}, or every region where it is null. */
    abstract void unregister(String region);

    /**
     * The integer {@code field} of a register body; where it is absent, {@code absent}, or an error
     * naming the field where {@code absent} is negative (the field is required).
     */
    final long longField(JsonNode body, String field, long absent) {
        JsonNode v = body.get(field);
        if (v == null) {
            if (absent < 0) {
                throw BackplaneException.invalid("register " + what + ": '" + field + "' is required");
            }
            return absent;
        }
        if (!v.canConvertToLong() || !v.isIntegralNumber()) {
            throw BackplaneException.invalid("register " + what + ": '" + field + "' must be an integer, not " + v);
        }
        return v.asLong();
    }
}
