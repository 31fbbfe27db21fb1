package io.backplane.plugin.http;

import static java.util.Objects.requireNonNull;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.JsonNode;
import io.backplane.protocol.CudaSharedMemory;
import io.backplane.protocol.SystemSharedMemory;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.host.DeviceSharedMemory;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpResponseStatus;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Base64;
import java.util.List;

/**
 * Triton's CUDA shared memory extension: {@code /v2/cudasharedmemory[/region/<r>]/}
 * {@code {status,register,unregister}}. The regions (IPC handles opened through the GPU
 * backend's driver, bounds checks, closing each handle once) belong to the
 * {@link DeviceSharedMemory} the host provides, reached through {@link SystemSharedMemory#device()};
 * this class owns the REST shape: register needs {@code raw_handle: {"b64": …}} (the 64 bytes of
 * a {@code cudaIpcMemHandle_t}), {@code device_id} and {@code byte_size}; status lists
 * {@code name}, {@code device_id}, {@code byte_size}; unregister without a region drops them all.
 * Without a usable GPU every call is refused as before ({@link CudaSharedMemory}).
 */
final class CudaSharedMemoryHandler implements RestRoute {
    private final SystemSharedMemory shm;

    CudaSharedMemoryHandler(SystemSharedMemory shm) {
        this.shm = requireNonNull(shm, "shm is null");
    }

    @Override
    public void serve(RestCall call) {
        List<String> seg = call.segments();
        DeviceSharedMemory cuda = shm.device();
        if (!cuda.available()) {
            if (seg.size() == 5 && seg.get(2).equals("region") && seg.get(4).equals("register")) {
                throw CudaSharedMemory.registerRefused(seg.get(3));
            }
            throw CudaSharedMemory.refused();
        }
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
                    for (DeviceSharedMemory.RegionStatus r : cuda.status(region)) {
                        g.writeStartObject();
                        g.writeStringField("name", r.name());
                        g.writeNumberField("device_id", r.deviceId());
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
                JsonNode raw = body.get("raw_handle");
                JsonNode b64 = raw == null ? null : raw.get("b64");
                if (b64 == null || !b64.isTextual()) {
                    throw BackplaneException.invalid("register CUDA shared-memory region '" + region
                            + "': 'raw_handle' must be {\"b64\": \"<base64 of the 64-byte cudaIpcMemHandle_t>\"}");
                }
                byte[] handle;
                try {
                    handle = Base64.getDecoder().decode(b64.asText());
                } catch (IllegalArgumentException e) {
                    throw BackplaneException.invalid("register CUDA shared-memory region '" + region + "': raw_handle.b64 is not base64: "
                            + e.getMessage());
                }
                long deviceId = longField(body, "device_id");
                if (deviceId < 0 || deviceId > Integer.MAX_VALUE) {
                    throw BackplaneException.invalid("register CUDA shared-memory region '" + region + "': device_id " + deviceId + " is not a GPU id");
                }
                long byteSize = longField(body, "byte_size");
                if (shm.contains(region)) {
                    throw BackplaneException.invalid("shared memory region '" + region + "' already in manager (as a system region); unregister it first");
                }
                cuda.register(region, handle, (int) deviceId, byteSize);
                call.sendEmpty(HttpResponseStatus.OK);
            }
            case "unregister" -> {
                call.requireMethod(HttpMethod.POST);
                if (region == null) {
                    cuda.unregisterAll();
                } else {
                    cuda.unregister(region);
                }
                call.sendEmpty(HttpResponseStatus.OK);
            }
            default -> throw call.notFound();
        }
    }

    private static long longField(JsonNode body, String field) {
        JsonNode v = body.get(field);
        if (v == null) {
            throw BackplaneException.invalid("register CUDA shared-memory region: '" + field + "' is required");
        }
        if (!v.canConvertToLong() || !v.isIntegralNumber()) {
            throw BackplaneException.invalid("register CUDA shared-memory region: '" + field + "' must be an integer, not " + v);
        }
        return v.asLong();
    }
}
