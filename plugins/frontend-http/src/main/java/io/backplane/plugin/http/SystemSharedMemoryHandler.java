package io.backplane.plugin.http;

import static java.util.Objects.requireNonNull;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.JsonNode;
import io.backplane.protocol.SystemSharedMemory;
import io.backplane.spi.BackplaneException;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpResponseStatus;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.List;

/**
 * Triton's system shared memory extension: {@code /v2/systemsharedmemory[/region/<r>]/}
 * {@code {status,register,unregister}}. The regions themselves, their mapping, bounds checks and
 * unmapping at close (DESIGN P7's "every offset is bounds-checked" on the client side) belong to
 * {@link SystemSharedMemory}, shared with the gRPC frontend and the infer codec; this class owns
 * only the REST shape: register needs a region and a string {@code key}, {@code offset} defaults to
 * 0, {@code byte_size} is required, and unregister without a region drops them all.
 */
final class SystemSharedMemoryHandler implements RestRoute {
    private final SystemSharedMemory shm;

    SystemSharedMemoryHandler(SystemSharedMemory shm) {
        this.shm = requireNonNull(shm, "shm is null");
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
                ByteBuf out = Unpooled.buffer(128);
                try (JsonGenerator g = Json.generator(out)) {
                    g.writeStartArray();
                    for (SystemSharedMemory.RegionStatus r : shm.status(region)) {
                        g.writeStartObject();
                        g.writeStringField("name", r.name());
                        g.writeStringField("key", r.key());
                        g.writeNumberField("offset", r.offset());
                        g.writeNumberField("byte_size", r.byteSize());
                        g.writeEndObject();
                    }
                    g.writeEndArray();
                } catch (IOException e) {
                    out.release();
                    throw new UncheckedIOException(e);
                } catch (RuntimeException e) {
                    out.release();
                    throw e;
                }
                call.sendJson(out);
            }
            case "register" -> {
                call.requireMethod(HttpMethod.POST);
                if (region == null) {
                    throw call.notFound();
                }
                JsonNode body = InferCodec.readJson(call.request().content());
                JsonNode key = body.get("key");
                if (key == null || !key.isTextual()) {
                    throw BackplaneException.invalid("register shared-memory region '" + region + "': 'key' (a string) is required");
                }
                shm.register(region, key.asText(), longField(body, "offset", 0), longField(body, "byte_size", -1));
                call.sendEmpty(HttpResponseStatus.OK);
            }
            case "unregister" -> {
                call.requireMethod(HttpMethod.POST);
                if (region == null) {
                    shm.unregisterAll();
                } else {
                    shm.unregister(region);
                }
                call.sendEmpty(HttpResponseStatus.OK);
            }
            default -> throw call.notFound();
        }
    }

    private static long longField(JsonNode body, String field, long absent) {
        JsonNode v = body.get(field);
        if (v == null) {
            if (absent < 0) {
                throw BackplaneException.invalid("register shared-memory region: '" + field + "' is required");
            }
            return absent;
        }
        if (!v.canConvertToLong() || !v.isIntegralNumber()) {
            throw BackplaneException.invalid("register shared-memory region: '" + field + "' must be an integer, not " + v);
        }
        return v.asLong();
    }
}
