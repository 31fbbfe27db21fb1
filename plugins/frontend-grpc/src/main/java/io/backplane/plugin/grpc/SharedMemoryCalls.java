package io.backplane.plugin.grpc;

import static io.backplane.plugin.grpc.GrpcCalls.status;

import io.backplane.protocol.CudaSharedMemory;
import io.backplane.protocol.SystemSharedMemory;
import io.backplane.protocol.inference.CudaSharedMemoryRegisterRequest;
import io.backplane.protocol.inference.CudaSharedMemoryRegisterResponse;
import io.backplane.protocol.inference.CudaSharedMemoryStatusRequest;
import io.backplane.protocol.inference.CudaSharedMemoryStatusResponse;
import io.backplane.protocol.inference.CudaSharedMemoryUnregisterRequest;
import io.backplane.protocol.inference.CudaSharedMemoryUnregisterResponse;
import io.backplane.protocol.inference.SystemSharedMemoryRegisterRequest;
import io.backplane.protocol.inference.SystemSharedMemoryRegisterResponse;
import io.backplane.protocol.inference.SystemSharedMemoryStatusRequest;
import io.backplane.protocol.inference.SystemSharedMemoryStatusResponse;
import io.backplane.protocol.inference.SystemSharedMemoryUnregisterRequest;
import io.backplane.protocol.inference.SystemSharedMemoryUnregisterResponse;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.host.DeviceSharedMemory;
import io.grpc.stub.StreamObserver;

import static io.backplane.plugin.grpc.GrpcCalls.unary;

/** The system and CUDA shared-memory extensions. */
final class SharedMemoryCalls {
    private final SystemSharedMemory shm;

    SharedMemoryCalls(SystemSharedMemory shm) {
        this.shm = shm;
    }

    void systemSharedMemoryStatus(SystemSharedMemoryStatusRequest req, StreamObserver<SystemSharedMemoryStatusResponse> obs) {
        unary(obs, () -> {
            SystemSharedMemoryStatusResponse.Builder b = SystemSharedMemoryStatusResponse.newBuilder();
            for (SystemSharedMemory.RegionStatus r : shm.status(req.getName().isEmpty() ? null : req.getName())) {
                b.putRegions(r.name(), SystemSharedMemoryStatusResponse.RegionStatus.newBuilder().setName(r.name()).setKey(r.key())
                        .setOffset(r.offset()).setByteSize(r.byteSize()).build());
            }
            return b.build();
        });
    }

    void systemSharedMemoryRegister(SystemSharedMemoryRegisterRequest req, StreamObserver<SystemSharedMemoryRegisterResponse> obs) {
        unary(obs, () -> {
            if (req.getOffset() < 0 || req.getByteSize() < 0) {
                throw BackplaneException.invalid("shared-memory region '" + req.getName() + "': offset "
                        + Long.toUnsignedString(req.getOffset()) + " or byte_size " + Long.toUnsignedString(req.getByteSize()) + " is too large");
            }
            shm.register(req.getName(), req.getKey(), req.getOffset(), req.getByteSize());
            return SystemSharedMemoryRegisterResponse.getDefaultInstance();
        });
    }

    void systemSharedMemoryUnregister(SystemSharedMemoryUnregisterRequest req, StreamObserver<SystemSharedMemoryUnregisterResponse> obs) {
        unary(obs, () -> {
            if (req.getName().isEmpty()) {
                shm.unregisterAll();
            } else {
                shm.unregister(req.getName());
            }
            return SystemSharedMemoryUnregisterResponse.getDefaultInstance();
        });
    }

    /** Triton's CUDA regions through the host's {@code DeviceSharedMemory}; without a usable GPU, none (as Triton without GPUs). */
    void cudaSharedMemoryStatus(CudaSharedMemoryStatusRequest req, StreamObserver<CudaSharedMemoryStatusResponse> obs) {
        DeviceSharedMemory cuda = shm.device();
        unary(obs, () -> {
            CudaSharedMemoryStatusResponse.Builder b = CudaSharedMemoryStatusResponse.newBuilder();
            for (DeviceSharedMemory.RegionStatus r : cuda.status(req.getName().isEmpty() ? null : req.getName())) {
                b.putRegions(r.name(), CudaSharedMemoryStatusResponse.RegionStatus.newBuilder().setName(r.name()).setDeviceId(r.deviceId())
                        .setByteSize(r.byteSize()).build());
            }
            return b.build();
        });
    }

    void cudaSharedMemoryRegister(CudaSharedMemoryRegisterRequest req, StreamObserver<CudaSharedMemoryRegisterResponse> obs) {
        DeviceSharedMemory cuda = shm.device();
        if (!cuda.available()) {
            obs.onError(status(CudaSharedMemory.registerRefused(req.getName())));
            return;
        }
        unary(obs, () -> {
            if (req.getDeviceId() < 0 || req.getDeviceId() > Integer.MAX_VALUE || req.getByteSize() < 0) {
                throw BackplaneException.invalid("register CUDA shared-memory region '" + req.getName() + "': device_id " + req.getDeviceId()
                        + " or byte_size " + Long.toUnsignedString(req.getByteSize()) + " is out of range");
            }
            if (shm.contains(req.getName())) {
                throw BackplaneException.invalid("shared memory region '" + req.getName() + "' already in manager (as a system region); unregister it first");
            }
            cuda.register(req.getName(), req.getRawHandle().toByteArray(), (int) req.getDeviceId(), req.getByteSize());
            return CudaSharedMemoryRegisterResponse.getDefaultInstance();
        });
    }

    void cudaSharedMemoryUnregister(CudaSharedMemoryUnregisterRequest req, StreamObserver<CudaSharedMemoryUnregisterResponse> obs) {
        DeviceSharedMemory cuda = shm.device();
        unary(obs, () -> {
            if (req.getName().isEmpty()) {
                cuda.unregisterAll();
            } else {
                cuda.unregister(req.getName());
            }
            return CudaSharedMemoryUnregisterResponse.getDefaultInstance();
        });
    }
}
