package io.backplane.plugin.grpc;

import io.backplane.protocol.Extensions;
import io.backplane.protocol.ModelVersions;
import io.backplane.protocol.SystemSharedMemory;
import io.backplane.protocol.ProtocolErrors;
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
import io.backplane.protocol.inference.InferParameter;
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
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.host.InferenceService;
import io.backplane.spi.host.ModelMetadata;
import io.backplane.spi.host.ModelState;
import io.backplane.spi.host.ModelStatistics;
import io.backplane.spi.host.ModelStatus;
import io.backplane.spi.host.RequestHandle;
import io.backplane.spi.host.ResponseObserver;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code inference.GRPCInferenceService} over an {@link InferenceService}, on the stubs generated
 * from Triton's grpc_service.proto (backplane-protocol). Calls run on the transport threads (direct
 * executor) and never block them: inference completes from the thread that ends the request;
 * repository load and unload run on the admin executor. The RPCs not overridden here (shared memory, trace, log settings) answer UNIMPLEMENTED from the generated base class.
 */
final class GrpcInferenceService extends GRPCInferenceServiceGrpc.GRPCInferenceServiceImplBase {
    private static final Logger log = LoggerFactory.getLogger(GrpcInferenceService.class);
    static final List<String> EXTENSIONS = Extensions.SERVED;

    private final InferenceService service;
    private final ExecutorService admin;
    private final SystemSharedMemory shm;

    GrpcInferenceService(InferenceService service, ExecutorService admin, SystemSharedMemory shm) {
        this.service = service;
        this.shm = shm;
        this.admin = admin;
    }

    @Override
    public void serverLive(ServerLiveRequest req, StreamObserver<ServerLiveResponse> obs) {
        unary(obs, () -> ServerLiveResponse.newBuilder().setLive(service.isLive()).build());
    }

    @Override
    public void serverReady(ServerReadyRequest req, StreamObserver<ServerReadyResponse> obs) {
        unary(obs, () -> ServerReadyResponse.newBuilder().setReady(service.isReady()).build());
    }

    @Override
    public void serverMetadata(ServerMetadataRequest req, StreamObserver<ServerMetadataResponse> obs) {
        unary(obs, () -> ServerMetadataResponse.newBuilder().setName("backplane").setVersion(service.version())
                .addAllExtensions(EXTENSIONS).build());
    }

    @Override
    public StreamObserver<ModelInferRequest> modelStreamInfer(StreamObserver<ModelStreamInferResponse> obs) {
        return new StreamSession(obs);
    }

    private static <R> void unary(StreamObserver<R> obs, Supplier<R> body) {
        R r;
        try {
            r = body.get();
        } catch (Throwable t) {
            obs.onError(status(t));
            return;
        }
        obs.onNext(r);
        obs.onCompleted();
    }

    @Override
    public void modelReady(ModelReadyRequest req, StreamObserver<ModelReadyResponse> obs) {
        unary(obs, () -> ModelReadyResponse.newBuilder().setReady(service.isModelReady(req.getName(), ModelVersions.parse(req.getVersion()))).build());
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
    public void modelInfer(ModelInferRequest req, StreamObserver<ModelInferResponse> obs) {
        CompletableFuture<InferenceResponse> f;
        ProtoTensors.Parsed parsed;
        try {
            parsed = ProtoTensors.toRequest(req, shm);
        } catch (Throwable t) {
            obs.onError(status(t));
            return;
        }
        try {
            f = service.infer(parsed.request());
        } catch (Throwable t) {
            parsed.release();
            obs.onError(status(t));
            return;
        }
        if (obs instanceof ServerCallStreamObserver<ModelInferResponse> sco && !f.isDone()) {
            sco.setOnCancelHandler(() -> f.cancel(false));
        }
        f.whenComplete((r, e) -> {
            if (e != null) {
                parsed.release();
                obs.onError(status(e));
                return;
            }
            ModelInferResponse resp;
            try {
                if (r.error() != null) {
                    throw r.error();
                }
                resp = ProtoTensors.toResponse(r, parsed.shmOutputs());
            } catch (Throwable t) {
                obs.onError(status(t));
                return;
            } finally {
                parsed.release();
            }
            try {
                obs.onNext(resp);
                obs.onCompleted();
            } catch (StatusRuntimeException cancelled) {
                log.debug("client went away before its response: {}", cancelled.getStatus());
            }
        });
    }

    @Override
    public void systemSharedMemoryStatus(SystemSharedMemoryStatusRequest req, StreamObserver<SystemSharedMemoryStatusResponse> obs) {
        unary(obs, () -> {
            SystemSharedMemoryStatusResponse.Builder b = SystemSharedMemoryStatusResponse.newBuilder();
            for (SystemSharedMemory.RegionStatus r : shm.status(req.getName().isEmpty() ? null : req.getName())) {
                b.putRegions(r.name(), SystemSharedMemoryStatusResponse.RegionStatus.newBuilder().setName(r.name()).setKey(r.key())
                        .setOffset(r.offset()).setByteSize(r.byteSize()).build());
            }
            return b.build();
        });
    }

    @Override
    public void systemSharedMemoryRegister(SystemSharedMemoryRegisterRequest req, StreamObserver<SystemSharedMemoryRegisterResponse> obs) {
        unary(obs, () -> {
            if (req.getOffset() < 0 || req.getByteSize() < 0) {
                throw BackplaneException.invalid("shared-memory region '" + req.getName() + "': offset "
                        + Long.toUnsignedString(req.getOffset()) + " or byte_size " + Long.toUnsignedString(req.getByteSize()) + " is too large");
            }
            shm.register(req.getName(), req.getKey(), req.getOffset(), req.getByteSize());
            return SystemSharedMemoryRegisterResponse.getDefaultInstance();
        });
    }

    @Override
    public void systemSharedMemoryUnregister(SystemSharedMemoryUnregisterRequest req, StreamObserver<SystemSharedMemoryUnregisterResponse> obs) {
        unary(obs, () -> {
            if (req.getName().isEmpty()) {
                shm.unregisterAll();
            } else {
                shm.unregister(req.getName());
            }
            return SystemSharedMemoryUnregisterResponse.getDefaultInstance();
        });
    }

    private static final String NO_CUDA = "CUDA shared memory is not supported by this server; use system shared memory";

    @Override
    public void cudaSharedMemoryStatus(CudaSharedMemoryStatusRequest req, StreamObserver<CudaSharedMemoryStatusResponse> obs) {
        obs.onError(status(new BackplaneException(ErrorCode.UNSUPPORTED, NO_CUDA)));
    }

    @Override
    public void cudaSharedMemoryRegister(CudaSharedMemoryRegisterRequest req, StreamObserver<CudaSharedMemoryRegisterResponse> obs) {
        obs.onError(status(new BackplaneException(ErrorCode.UNSUPPORTED, NO_CUDA)));
    }

    @Override
    public void cudaSharedMemoryUnregister(CudaSharedMemoryUnregisterRequest req, StreamObserver<CudaSharedMemoryUnregisterResponse> obs) {
        obs.onError(status(new BackplaneException(ErrorCode.UNSUPPORTED, NO_CUDA)));
    }

    @Override
    public void repositoryIndex(RepositoryIndexRequest req, StreamObserver<RepositoryIndexResponse> obs) {
        unary(obs, () -> {
            RepositoryIndexResponse.Builder b = RepositoryIndexResponse.newBuilder();
            for (ModelStatus s : service.repositoryIndex()) {
                if (req.getReady() && s.state() != ModelState.READY) {
                    continue;
                }
                b.addModels(RepositoryIndexResponse.ModelIndex.newBuilder().setName(s.name())
                        .setVersion(s.version() > 0 ? Long.toString(s.version()) : "").setState(s.state().name())
                        .setReason(s.reason() == null ? "" : s.reason()));
            }
            return b.build();
        });
    }

    @Override
    public void repositoryModelLoad(RepositoryModelLoadRequest req, StreamObserver<RepositoryModelLoadResponse> obs) {
        repositoryCall("load", req.getModelName(), req.getParametersCount(), obs, () -> {
            service.load(req.getModelName());
            return RepositoryModelLoadResponse.getDefaultInstance();
        });
    }

    @Override
    public void repositoryModelUnload(RepositoryModelUnloadRequest req, StreamObserver<RepositoryModelUnloadResponse> obs) {
        repositoryCall("unload", req.getModelName(), req.getParametersCount(), obs, () -> {
            service.unload(req.getModelName());
            return RepositoryModelUnloadResponse.getDefaultInstance();
        });
    }

    private <R> void repositoryCall(String op, String model, int parameters, StreamObserver<R> obs, Supplier<R> body) {
        if (parameters > 0) {
            obs.onError(status(new BackplaneException(ErrorCode.UNSUPPORTED, "repository " + op + " parameters are not supported; "
                    + op + " models from the repository as they are")));
            return;
        }
        if (model.isEmpty()) {
            obs.onError(status(BackplaneException.invalid("model_name is empty")));
            return;
        }
        try {
            admin.execute(() -> unary(obs, body));
        } catch (RejectedExecutionException e) {
            obs.onError(status(BackplaneException.unavailable("the grpc frontend is shutting down")));
        }
    }

    /** One ModelStreamInfer call: any number of requests in flight, responses interleaved as they come. */
    private final class StreamSession implements StreamObserver<ModelInferRequest> {
        private final StreamObserver<ModelStreamInferResponse> out;
        private final Set<RequestHandle> open = ConcurrentHashMap.newKeySet();
        private boolean halfClosed;
        private boolean finished;
        private int inFlight;

        StreamSession(StreamObserver<ModelStreamInferResponse> out) {
            this.out = out;
        }

        @Override
        public void onNext(ModelInferRequest req) {
            InferenceRequest request;
            try {
                request = ProtoTensors.toRequest(req);
            } catch (Throwable t) {
                send(error(req.getModelName(), req.getId(), t));
                return;
            }
            InferParameter efr = req.getParametersMap().get("triton_enable_empty_final_response");
            boolean emptyFinal = efr != null && efr.getBoolParam();
            synchronized (this) {
                inFlight++;
            }
            Observer obs = new Observer(req, emptyFinal);
            RequestHandle h = service.stream(request, obs);
            if (!h.isDone()) {
                open.add(h);
                if (h.isDone()) {
                    open.remove(h);
                }
            }
            obs.handle = h;
        }

        @Override
        public void onError(Throwable t) {
            // The client cancelled or the connection broke: cancel what is still running.
            for (RequestHandle h : open) {
                h.cancel();
            }
            synchronized (this) {
                finished = true;
            }
        }

        @Override
        public void onCompleted() {
            synchronized (this) {
                halfClosed = true;
                maybeFinish();
            }
        }

        private void maybeFinish() {
            if (halfClosed && inFlight == 0 && !finished) {
                finished = true;
                try {
                    out.onCompleted();
                } catch (RuntimeException e) {
                    log.debug("stream already closed: {}", e.toString());
                }
            }
        }

        private synchronized void send(ModelStreamInferResponse r) {
            if (finished) {
                return;
            }
            try {
                out.onNext(r);
            } catch (RuntimeException e) {
                log.debug("stream response dropped, the call is closed: {}", e.toString());
            }
        }

        private synchronized void ended(RequestHandle h) {
            open.remove(h);
            inFlight--;
            maybeFinish();
        }

        private final class Observer implements ResponseObserver {
            private final ModelInferRequest req;
            private final boolean emptyFinal;
            volatile RequestHandle handle;

            Observer(ModelInferRequest req, boolean emptyFinal) {
                this.req = req;
                this.emptyFinal = emptyFinal;
            }

            @Override
            public void onResponse(InferenceResponse response) {
                BackplaneException e = response.error();
                if (e != null) {
                    send(error(req.getModelName(), req.getId(), e));
                    return;
                }
                ModelInferResponse r;
                try {
                    r = ProtoTensors.toResponse(response);
                } catch (RuntimeException x) {
                    send(error(req.getModelName(), req.getId(), x));
                    return;
                }
                if (emptyFinal) {
                    r = r.toBuilder().putParameters("triton_final_response", InferParameter.newBuilder().setBoolParam(false).build()).build();
                }
                send(ModelStreamInferResponse.newBuilder().setInferResponse(r).build());
            }

            @Override
            public void onComplete() {
                if (emptyFinal) {
                    send(ModelStreamInferResponse.newBuilder().setInferResponse(ModelInferResponse.newBuilder().setModelName(req.getModelName())
                            .setModelVersion(req.getModelVersion()).setId(req.getId())
                            .putParameters("triton_final_response", InferParameter.newBuilder().setBoolParam(true).build())).build());
                }
                done();
            }

            @Override
            public void onError(BackplaneException error) {
                send(error(req.getModelName(), req.getId(), error));
                done();
            }

            private void done() {
                RequestHandle h = handle;
                if (h != null) {
                    ended(h);
                } else {
                    synchronized (StreamSession.this) {
                        inFlight--;
                        maybeFinish();
                    }
                }
            }
        }
    }

    private static ModelStreamInferResponse error(String model, String id, Throwable t) {
        if (ProtocolErrors.isUnexpected(t)) {
            log.warn("internal error serving a grpc stream request", ProtocolErrors.unwrap(t));
        }
        return ModelStreamInferResponse.newBuilder().setErrorMessage(String.valueOf(ProtocolErrors.classify(t).getMessage()))
                .setInferResponse(ModelInferResponse.newBuilder().setModelName(model).setId(id)).build();
    }

    /** The gRPC status for {@code t}: its {@link ProtocolErrors category}'s {@link ErrorCode#grpcStatus()} and message. */
    static StatusRuntimeException status(Throwable t) {
        if (ProtocolErrors.unwrap(t) instanceof StatusRuntimeException s) {
            return s;
        }
        if (ProtocolErrors.isUnexpected(t)) {
            log.warn("internal error serving a grpc call", ProtocolErrors.unwrap(t));
        }
        BackplaneException b = ProtocolErrors.classify(t);
        return Status.fromCode(Status.Code.valueOf(b.code().grpcStatus())).withDescription(b.getMessage()).withCause(b.getCause())
                .asRuntimeException();
    }
}
