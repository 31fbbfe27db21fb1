package io.backplane.plugin.http;

import static java.util.Objects.requireNonNull;

import com.fasterxml.jackson.databind.JsonNode;
import io.backplane.protocol.SystemSharedMemory;
import io.backplane.spi.BackplaneException;
import io.netty.buffer.ByteBuf;

/**
 * Triton's system shared memory extension: {@code /v2/systemsharedmemory[/region/<r>]/}
 * {@code {status,register,unregister}}. The regions themselves, their mapping, bounds checks and
 * unmapping at close (DESIGN P7's "every offset is bounds-checked" on the client side) belong to
 * {@link SystemSharedMemory}, shared with the gRPC frontend and the infer codec; this class owns
 * only the REST shape (the paths in {@link SharedMemoryRoute}): register needs a string
 * {@code key}, {@code offset} defaults to 0, {@code byte_size} is required.
 */
final class SystemSharedMemoryHandler extends SharedMemoryRoute {
    private final SystemSharedMemory shm;

    SystemSharedMemoryHandler(SystemSharedMemory shm) {
        super("shared-memory region");
        this.shm = requireNonNull(shm, "shm is null");
    }

    @Override
    ByteBuf status(String region) {
        return Json.write(g -> {
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
        });
    }

    @Override
    void register(String region, JsonNode body) {
        JsonNode key = body.get("key");
        if (key == null || !key.isTextual()) {
            throw BackplaneException.invalid("register shared-memory region '" + region + "': 'key' (a string) is required");
        }
        shm.register(region, key.asText(), longField(body, "offset", 0), longField(body, "byte_size", -1));
    }

    @Override
    void unregister(String region) {
        if (region == null) {
            shm.unregisterAll();
        } else {
            shm.unregister(region);
        }
    }
}
