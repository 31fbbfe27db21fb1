package io.backplane.plugin.http;

import static java.util.Objects.requireNonNull;

import com.fasterxml.jackson.databind.JsonNode;
import io.backplane.protocol.CudaSharedMemory;
import io.backplane.protocol.SystemSharedMemory;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.host.DeviceSharedMemory;
import io.netty.buffer.ByteBuf;
import java.util.Base64;
import java.util.List;

/**
 * Triton's CUDA shared memory extension: {@code /v2/cudasharedmemory[/region/<r>]/}
 * {@code {status,register,unregister}}. The regions (IPC handles opened through the GPU
 * backend's driver, bounds checks, closing each handle once) belong to the
 * {@link DeviceSharedMemory} the host provides, reached through {@link SystemSharedMemory#device()};
 * this class owns the REST shape (the paths in {@link SharedMemoryRoute}): register needs
 * {@code raw_handle: {"b64": …}} (the 64 bytes of a {@code cudaIpcMemHandle_t}), {@code device_id}
 * and {@code byte_size}; status lists {@code name}, {@code device_id}, {@code byte_size}.
 * Without a usable GPU a register is refused ({@link CudaSharedMemory}); status lists nothing and
 * unregister succeeds, as in Triton built without GPU support.
 */
final class CudaSharedMemoryHandler extends SharedMemoryRoute {
    private final SystemSharedMemory shm;

    CudaSharedMemoryHandler(SystemSharedMemory shm) {
        super("CUDA shared-memory region");
        this.shm = requireNonNull(shm, "shm is null");
    }

    @Override
    public void serve(RestCall call) {
        if (!shm.device().available()) {
            List<String> seg = call.segments();
            if (seg.size() == 5 && seg.get(2).equals("region") && seg.get(4).equals("register")) {
                throw CudaSharedMemory.registerRefused(seg.get(3));
            }
            // status and unregister answer as Triton without GPUs does: nothing registered, nothing to unregister
        }
        super.serve(call);
    }

    @Override
    ByteBuf status(String region) {
        List<DeviceSharedMemory.RegionStatus> regions = shm.device().status(region);
        return Json.write(g -> {
            g.writeStartArray();
            for (DeviceSharedMemory.RegionStatus r : regions) {
                g.writeStartObject();
                g.writeStringField("name", r.name());
                g.writeNumberField("device_id", r.deviceId());
                g.writeNumberField("byte_size", r.byteSize());
                g.writeEndObject();
            }
            g.writeEndArray();
        });
    }

    @Override
    void register(String region, JsonNode body) {
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
        long deviceId = longField(body, "device_id", -1);
        if (deviceId < 0 || deviceId > Integer.MAX_VALUE) {
            throw BackplaneException.invalid("register CUDA shared-memory region '" + region + "': device_id " + deviceId + " is not a GPU id");
        }
        long byteSize = longField(body, "byte_size", -1);
        if (shm.contains(region)) {
            throw BackplaneException.invalid("shared memory region '" + region + "' already in manager (as a system region); unregister it first");
        }
        shm.device().register(region, handle, (int) deviceId, byteSize);
    }

    @Override
    void unregister(String region) {
        if (region == null) {
            shm.device().unregisterAll();
        } else {
            shm.device().unregister(region);
        }
    }
}
