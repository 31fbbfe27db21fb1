package io.backplane.plugin.grpc;

import static io.backplane.plugin.grpc.GrpcCalls.unary;

import io.backplane.protocol.Extensions;
import io.backplane.protocol.LogSettingsCodec;
import io.backplane.protocol.inference.LogSettingsRequest;
import io.backplane.protocol.inference.LogSettingsResponse;
import io.backplane.spi.host.LogControl;
import io.backplane.spi.host.RequestTracer;
import io.backplane.protocol.inference.TraceSettingRequest;
import io.backplane.protocol.inference.TraceSettingResponse;
import io.backplane.protocol.ModelVersions;
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
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.InferBatchStatistics;
import io.backplane.protocol.inference.InferStatistics;
import io.backplane.protocol.inference.MemoryUsage;
import io.backplane.protocol.inference.ModelStatisticsRequest;
import io.backplane.protocol.inference.ModelStatisticsResponse;
import io.backplane.protocol.inference.StatisticDuration;
import io.backplane.protocol.inference.ModelConfigRequest;
import io.backplane.protocol.inference.ModelConfigResponse;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelInferResponse;
import io.backplane.protocol.inference.ModelMetadataRequest;
import io.backplane.protocol.inference.ModelMetadataResponse;
import io.backplane.protocol.inference.ModelReadyRequest;
import io.backplane.protocol.inference.ModelReadyResponse;
import io.backplane.protocol.inference.ModelStreamInferResponse;
import io.backplane.protocol.inference.RepositoryIndexRequest;
import io.backplane.protocol.inference.RepositoryIndexResponse;
import io.backplane.protocol.inference.RepositoryModelLoadRequest;
import io.backplane.protocol.inference.RepositoryModelLoadResponse;
import io.backplane.protocol.inference.RepositoryModelUnloadRequest;
import io.backplane.protocol.inference.RepositoryModelUnloadResponse;
import io.backplane.protocol.inference.ServerLiveRequest;
import io.backplane.protocol.inference.ServerLiveResponse;
import io.backplane.protocol.inference.ServerMetadataRequest;
import io.backplane.protocol.inference.ServerMetadataResponse;
import io.backplane.protocol.inference.ServerReadyRequest;
import io.backplane.protocol.inference.ServerReadyResponse;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.host.InferenceService;
import io.backplane.spi.host.ModelMetadata;
import io.backplane.spi.host.ModelStatistics;
import org.jspecify.annotations.Nullable;
import io.grpc.stub.StreamObserver;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;

/**
 * {@code inference.GRPCInferenceService} over an {@link InferenceService}, on the stubs generated
 * from Triton's grpc_service.proto (backplane-protocol). The generated base class is one type for
 * the whole service, so this class is the dispatcher: it answers the health, metadata,
 * configuration, statistics, trace and logging calls itself and hands the rest to one class per
 * concern — {@link InferCalls} (ModelInfer, ModelStreamInfer with {@link StreamSession}),
 * {@link RepositoryCalls} (the repository extension) and {@link SharedMemoryCalls} (system and
 * CUDA shared memory). Calls run on the transport threads (direct executor) and never block them:
 * inference completes from the thread that ends the request; repository load and unload run on
 * the admin executor.
 */
final class GrpcInferenceService extends GRPCInferenceServiceGrpc.GRPCInferenceServiceImplBase {
    private final InferenceService service;
    private final @Nullable LogControl logs;
    private final RequestTracer tracer;
    private final InferCalls infer;
    private final RepositoryCalls repository;
    private final SharedMemoryCalls sharedMemory;

    private final boolean cudaSharedMemory;

    GrpcInferenceService(InferenceService service, ExecutorService admin, SystemSharedMemory shm, @Nullable LogControl logs, RequestTracer tracer) {
        this.service = service;
        this.logs = logs;
        this.tracer = tracer;
        this.infer = new InferCalls(service, shm, tracer);
        this.repository = new RepositoryCalls(service, admin);
        this.sharedMemory = new SharedMemoryCalls(shm);
        this.cudaSharedMemory = shm.device().available();
    }

    @Override
    public void serverLive(ServerLiveRequest req, StreamObserver<ServerLiveResponse> obs) {
        unary(obs, () -> ServerLiveResponse.newBuilder().setLive(service.isLive()).build());
    }

    @Override
    public void serverReady(ServerReadyRequest req, StreamObserver<ServerReadyResponse> obs) {
        // The host's answer may wait for instances' readiness checks: answered when it comes, never blocking a transport thread.
        service.checkReady().whenComplete((ready, e) -> unary(obs, () -> ServerReadyResponse.newBuilder()
                .setReady(e == null && Boolean.TRUE.equals(ready)).build()));
    }

    @Override
    public void serverMetadata(ServerMetadataRequest req, StreamObserver<ServerMetadataResponse> obs) {
        unary(obs, () -> ServerMetadataResponse.newBuilder().setName(service.serverName()).setVersion(service.version())
                .addAllExtensions(Extensions.served(logs != null, tracer.serves(), cudaSharedMemory)).build());
    }

    @Override
    public StreamObserver<ModelInferRequest> modelStreamInfer(StreamObserver<ModelStreamInferResponse> obs) {
        return infer.modelStreamInfer(obs);
    }

    @Override
    public void modelInfer(ModelInferRequest req, StreamObserver<ModelInferResponse> obs) {
        infer.modelInfer(req, obs);
    }

    @Override
    public void repositoryIndex(RepositoryIndexRequest req, StreamObserver<RepositoryIndexResponse> obs) {
        repository.repositoryIndex(req, obs);
    }

    @Override
    public void repositoryModelLoad(RepositoryModelLoadRequest req, StreamObserver<RepositoryModelLoadResponse> obs) {
        repository.repositoryModelLoad(req, obs);
    }

    @Override
    public void repositoryModelUnload(RepositoryModelUnloadRequest req, StreamObserver<RepositoryModelUnloadResponse> obs) {
        repository.repositoryModelUnload(req, obs);
    }

    @Override
    public void systemSharedMemoryStatus(SystemSharedMemoryStatusRequest req, StreamObserver<SystemSharedMemoryStatusResponse> obs) {
        sharedMemory.systemSharedMemoryStatus(req, obs);
    }

    @Override
    public void systemSharedMemoryRegister(SystemSharedMemoryRegisterRequest req, StreamObserver<SystemSharedMemoryRegisterResponse> obs) {
        sharedMemory.systemSharedMemoryRegister(req, obs);
    }

    @Override
    public void systemSharedMemoryUnregister(SystemSharedMemoryUnregisterRequest req, StreamObserver<SystemSharedMemoryUnregisterResponse> obs) {
        sharedMemory.systemSharedMemoryUnregister(req, obs);
    }

    @Override
    public void cudaSharedMemoryStatus(CudaSharedMemoryStatusRequest req, StreamObserver<CudaSharedMemoryStatusResponse> obs) {
        sharedMemory.cudaSharedMemoryStatus(req, obs);
    }

    @Override
    public void cudaSharedMemoryRegister(CudaSharedMemoryRegisterRequest req, StreamObserver<CudaSharedMemoryRegisterResponse> obs) {
        sharedMemory.cudaSharedMemoryRegister(req, obs);
    }

    @Override
    public void cudaSharedMemoryUnregister(CudaSharedMemoryUnregisterRequest req, StreamObserver<CudaSharedMemoryUnregisterResponse> obs) {
        sharedMemory.cudaSharedMemoryUnregister(req, obs);
    }

    @Override
    public void modelReady(ModelReadyRequest req, StreamObserver<ModelReadyResponse> obs) {
        long version;
        try {
            version = ModelVersions.parse(req.getVersion());
        } catch (RuntimeException e) {
            obs.onError(GrpcCalls.status(e));
            return;
        }
        service.checkModelReady(req.getName(), version).whenComplete((ready, e) -> unary(obs, () -> ModelReadyResponse.newBuilder()
                .setReady(e == null && Boolean.TRUE.equals(ready)).build()));
    }

    @Override
    public void modelMetadata(ModelMetadataRequest req, StreamObserver<ModelMetadataResponse> obs) {
        unary(obs, () -> {
            ModelMetadata md = service.metadata(req.getName(), ModelVersions.parse(req.getVersion()));
            ModelMetadataResponse.Builder b = ModelMetadataResponse.newBuilder().setName(md.name())
                    .setPlatform(md.platform().isEmpty() ? md.backend() : md.platform());
            md.versions().forEach(v -> b.addVersions(Long.toString(v)));
            for (ModelMetadata.TensorMetadata t : md.inputs()) {
                b.addInputs(ModelMetadataResponse.TensorMetadata.newBuilder().setName(t.name()).setDatatype(t.datatype().protocolName())
                        .addAllShape(t.shape()));
            }
            for (ModelMetadata.TensorMetadata t : md.outputs()) {
                b.addOutputs(ModelMetadataResponse.TensorMetadata.newBuilder().setName(t.name()).setDatatype(t.datatype().protocolName())
                        .addAllShape(t.shape()));
            }
            return b.build();
        });
    }

    @Override
    public void modelStatistics(ModelStatisticsRequest req, StreamObserver<ModelStatisticsResponse> obs) {
        unary(obs, () -> {
            ModelStatisticsResponse.Builder b = ModelStatisticsResponse.newBuilder();
            for (ModelStatistics st : service.statistics(req.getName(), ModelVersions.parse(req.getVersion()))) {
                InferStatistics.Builder inf = InferStatistics.newBuilder().setSuccess(duration(st.success())).setFail(duration(st.fail()))
                        .setQueue(duration(st.queue())).setComputeInput(duration(st.computeInput()))
                        .setComputeInfer(duration(st.computeInfer())).setComputeOutput(duration(st.computeOutput()))
                        .setCacheHit(duration(st.cacheHit())).setCacheMiss(duration(st.cacheMiss()));
                var m = io.backplane.protocol.inference.ModelStatistics.newBuilder().setName(st.name())
                        .setVersion(Long.toString(st.version())).setLastInference(st.lastInference())
                        .setInferenceCount(st.inferenceCount()).setExecutionCount(st.executionCount()).setInferenceStats(inf);
                for (ModelStatistics.BatchStatistics bs : st.batches()) {
                    m.addBatchStats(InferBatchStatistics.newBuilder().setBatchSize(bs.batchSize()).setComputeInput(duration(bs.computeInput()))
                            .setComputeInfer(duration(bs.computeInfer())).setComputeOutput(duration(bs.computeOutput())));
                }
                for (ModelStatistics.MemoryUsage mu : st.memoryUsage()) {
                    m.addMemoryUsage(MemoryUsage.newBuilder().setType(mu.type()).setId(mu.id()).setByteSize(mu.bytes()));
                }
                b.addModelStats(m);
            }
            return b.build();
        });
    }

    private static StatisticDuration duration(ModelStatistics.Duration d) {
        return StatisticDuration.newBuilder().setCount(d.count()).setNs(d.nanos()).build();
    }

    @Override
    public void modelConfig(ModelConfigRequest req, StreamObserver<ModelConfigResponse> obs) {
        unary(obs, () -> ModelConfigResponse.newBuilder()
                .setConfig(ConfigProtos.toProto(service.modelConfig(req.getName(), ModelVersions.parse(req.getVersion())))).build());
    }

    @Override
    public void traceSetting(TraceSettingRequest req, StreamObserver<TraceSettingResponse> obs) {
        unary(obs, () -> {
            if (!tracer.serves()) {
                throw new BackplaneException(ErrorCode.UNSUPPORTED, "this host does not trace requests (trace extension)");
            }
            Map<String, List<String>> now;
            if (req.getSettingsCount() > 0) {
                Map<String, @Nullable List<String>> changes = new java.util.LinkedHashMap<>();
                // As Triton: a setting with no value clears the model's own value.
                req.getSettingsMap().forEach((k, v) -> changes.put(k, v.getValueCount() == 0 ? null : List.copyOf(v.getValueList())));
                now = tracer.update(req.getModelName(), changes);
            } else {
                now = tracer.settings(req.getModelName());
            }
            TraceSettingResponse.Builder b = TraceSettingResponse.newBuilder();
            now.forEach((k, v) -> b.putSettings(k, TraceSettingResponse.SettingValue.newBuilder().addAllValue(v).build()));
            return b.build();
        });
    }

    @Override
    public void logSettings(LogSettingsRequest req, StreamObserver<LogSettingsResponse> obs) {
        unary(obs, () -> {
            LogControl control = logs;
            if (control == null) {
                throw new BackplaneException(ErrorCode.UNSUPPORTED, "this host offers no run-time logging control (logging extension)");
            }
            LogControl.Settings now = control.settings();
            if (req.getSettingsCount() > 0) {
                Map<String, Object> changes = new java.util.LinkedHashMap<>();
                for (Map.Entry<String, LogSettingsRequest.SettingValue> e : req.getSettingsMap().entrySet()) {
                    LogSettingsRequest.SettingValue v = e.getValue();
                    changes.put(e.getKey(), switch (v.getParameterChoiceCase()) {
                        case BOOL_PARAM -> v.getBoolParam();
                        case UINT32_PARAM -> Integer.toUnsignedLong(v.getUint32Param());
                        case STRING_PARAM -> v.getStringParam();
                        case PARAMETERCHOICE_NOT_SET -> "(no value)";
                    });
                }
                now = control.update(LogSettingsCodec.merge(now, changes));
            }
            LogSettingsResponse.Builder b = LogSettingsResponse.newBuilder();
            for (Map.Entry<String, Object> e : LogSettingsCodec.toMap(now).entrySet()) {
                LogSettingsResponse.SettingValue.Builder v = LogSettingsResponse.SettingValue.newBuilder();
                switch (e.getValue()) {
                    case Boolean bo -> v.setBoolParam(bo);
                    case Integer i -> v.setUint32Param(i);
                    default -> v.setStringParam(String.valueOf(e.getValue()));
                }
                b.putSettings(e.getKey(), v.build());
            }
            return b.build();
        });
    }

}
