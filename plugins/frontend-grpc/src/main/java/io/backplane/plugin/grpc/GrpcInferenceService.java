package io.backplane.plugin.grpc;

import io.backplane.protocol.Extensions;
import io.backplane.protocol.LoadParameters;
import io.backplane.protocol.LogSettingsCodec;
import io.backplane.protocol.inference.LogSettingsRequest;
import io.backplane.protocol.inference.LogSettingsResponse;
import io.backplane.spi.host.LogControl;
import io.backplane.spi.host.RequestTracer;
import io.backplane.spi.RequestTrace;
import io.backplane.protocol.inference.TraceSettingRequest;
import io.backplane.protocol.inference.TraceSettingResponse;
import io.backplane.protocol.ModelVersions;
import io.backplane.protocol.inference.ModelRepositoryParameter;
import io.backplane.spi.host.LoadOverride;
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
import io.backplane.spi.host.MemoryReservation;
import io.backplane.spi.host.ModelMetadata;
import io.backplane.spi.host.ModelState;
import io.backplane.spi.host.ModelStatistics;
import io.backplane.spi.host.ModelStatus;
import io.backplane.spi.host.RequestHandle;
import io.backplane.spi.host.ResponseObserver;
import org.jspecify.annotations.Nullable;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code inference.GRPCInferenceService} over an {@link InferenceService}, on the stubs generated
 * from Triton's grpc_service.proto (backplane-protocol). Calls run on the transport threads (direct
 * executor) and never block them: inference completes from the thread that ends the request;
 * repository load and unload run on the admin executor. The RPCs not overridden here (trace and log settings) answer
 * UNIMPLEMENTED from the generated base class.
 */
final class GrpcInferenceService extends GRPCInferenceServiceGrpc.GRPCInferenceServiceImplBase {
    private static final Logger log = LoggerFactory.getLogger(GrpcInferenceService.class);

    private final InferenceService service;
    private final ExecutorService admin;
    private final SystemSharedMemory shm;
    private final @Nullable LogControl logs;
    private final RequestTracer tracer;

    GrpcInferenceService(InferenceService service, ExecutorService admin, SystemSharedMemory shm, @Nullable LogControl logs, RequestTracer tracer) {
        this.service = service;
        this.logs = logs;
        this.tracer = tracer;
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
                .addAllExtensions(Extensions.served(logs != null, tracer.serves())).build());
    }

    @Override
    public StreamObserver<ModelInferRequest> modelStreamInfer(StreamObserver<ModelStreamInferResponse> obs) {
        return new StreamSession(obs, TritonHeaders.GRPC_ERROR.get(), TritonHeaders.TRACEPARENT.get());
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
        MemoryReservation held;
        try {
            held = reserve(req);
        } catch (Throwable t) {
            obs.onError(status(t));
            return;
        }
        try {
            parsed = ProtoTensors.toRequest(req, shm);
        } catch (Throwable t) {
            held.close();
            obs.onError(status(t));
            return;
        }
        RequestTrace trace = tracer.start(req.getModelName(), TritonHeaders.TRACEPARENT.get());
        try {
            f = service.infer(trace == RequestTrace.NONE ? parsed.request() : parsed.request().toBuilder().trace(trace).build());
        } catch (Throwable t) {
            held.close();
            parsed.release();
            trace.finish(t);
            obs.onError(status(t));
            return;
        }
        if (obs instanceof ServerCallStreamObserver<ModelInferResponse> sco && !f.isDone()) {
            sco.setOnCancelHandler(() -> f.cancel(false));
        }
        // One callback, in this order: the trace ends and the memory is returned before the reply goes out, so a
        // client holding its answer finds a finished trace (two callbacks on one future run in no set order).
        f.whenComplete((r, e) -> {
            held.close();
            try {
                trace.finish(e != null ? e : r.error());
            } catch (RuntimeException bad) {
                log.warn("the request trace failed to finish; the reply is still sent", bad);
            }
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
        LoadOverride override;
        try {
            override = loadOverride(req);
        } catch (RuntimeException e) {
            obs.onError(status(e));
            return;
        }
        repositoryCall("load", req.getModelName(), 0, obs, () -> {
            service.load(req.getModelName(), override);
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

    /** Triton's load parameters: {@code config} (string_param, JSON) and {@code file:<path>} (bytes_param). */
    private static LoadOverride loadOverride(RepositoryModelLoadRequest req) {
        LoadParameters lp = LoadParameters.of(req.getModelName());
        for (Map.Entry<String, ModelRepositoryParameter> e : req.getParametersMap().entrySet()) {
            ModelRepositoryParameter p = e.getValue();
            switch (p.getParameterChoiceCase()) {
                case STRING_PARAM -> {
                    if (e.getKey().startsWith(LoadParameters.FILE_PREFIX)) {
                        throw lp.wrongType(e.getKey(), "a string_param (send the file as bytes_param)");
                    }
                    lp.text(e.getKey(), p.getStringParam());
                }
                case BYTES_PARAM -> lp.bytes(e.getKey(), p.getBytesParam().toByteArray());
                default -> throw lp.wrongType(e.getKey(), "a " + p.getParameterChoiceCase().name().toLowerCase(java.util.Locale.ROOT));
            }
        }
        return lp.override();
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

    /**
     * One ModelStreamInfer call: any number of requests in flight, responses interleaved as they
     * come. Every response carries {@code triton_final_response} (true on the one that ends its
     * request); with the request parameter {@code triton_enable_empty_final_response=true} a
     * request that ends without a last response (a decoupled model's empty FINAL) gets an empty
     * response saying so. Errors go into the stream as {@code error_message}, or, when the call
     * carries the header {@code triton_grpc_error: true}, the first error ends the whole stream
     * with its gRPC status, cancels the open requests and drops everything after it (Triton's
     * semantics for both).
     */
    private final class StreamSession implements StreamObserver<ModelInferRequest> {
        private final StreamObserver<ModelStreamInferResponse> out;
        private final boolean grpcError;
        private final Set<RequestHandle> open = ConcurrentHashMap.newKeySet();
        private boolean halfClosed;
        private boolean finished;
        private int inFlight;

        private final @Nullable String traceParent;

        /** The call's flow control; null when the observer is not a server call's (tests). */
        private final @Nullable ServerCallStreamObserver<ModelStreamInferResponse> flow;
        /** Stages handed out by {@link #ready()} while the call was not ready: completed by the one on-ready handler or at the end. */
        private final Queue<CompletableFuture<Void>> waiting = new ConcurrentLinkedQueue<>();
        private volatile boolean over;

        StreamSession(StreamObserver<ModelStreamInferResponse> out, boolean grpcError, @Nullable String traceParent) {
            this.out = out;
            this.grpcError = grpcError;
            this.traceParent = traceParent;
            // Must be set while the call starts (here, inside modelStreamInfer): one handler for the whole call.
            this.flow = out instanceof ServerCallStreamObserver<ModelStreamInferResponse> sco ? sco : null;
            if (flow != null) {
                flow.setOnReadyHandler(this::wakeReady);
            }
        }

        /**
         * Flow control (DESIGN P9): completes when gRPC's outbound buffer for this call is below its
         * threshold, or the stream ended. A waiter is queued before {@code isReady} is read again,
         * and the handler drains the queue after gRPC turned ready, so no wake-up is lost.
         */
        CompletionStage<Void> ready() {
            ServerCallStreamObserver<ModelStreamInferResponse> f = flow;
            if (f == null || over || f.isReady()) {
                return READY;
            }
            CompletableFuture<Void> w = new CompletableFuture<>();
            waiting.add(w);
            if (over || f.isReady()) {
                wakeReady();
            }
            return w;
        }

        private void wakeReady() {
            CompletableFuture<Void> w;
            while ((w = waiting.poll()) != null) {
                w.complete(null);
            }
        }

        /** The stream ended (completed, failed or cancelled): nothing waits for it any more. */
        private void streamOver() {
            over = true;
            wakeReady();
        }

        @Override
        public void onNext(ModelInferRequest req) {
            synchronized (this) {
                if (finished) {
                    return; // the stream ended with an error status: what the client still sends is dropped
                }
                inFlight++;
            }
            MemoryReservation held;
            try {
                held = reserve(req);
            } catch (Throwable t) {
                fail(t, ModelStreamInferResponse.newBuilder().setErrorMessage(message(t))
                        .setInferResponse(ModelInferResponse.newBuilder().setId(req.getId())).build());
                ended(null, null);
                return;
            }
            ProtoTensors.Parsed parsed;
            try {
                parsed = ProtoTensors.toRequest(req, shm);
            } catch (Throwable t) {
                held.close();
                // Refused before it ran: Triton answers with the id only.
                fail(t, ModelStreamInferResponse.newBuilder().setErrorMessage(message(t))
                        .setInferResponse(ModelInferResponse.newBuilder().setId(req.getId())).build());
                ended(null, null);
                return;
            }
            InferParameter efr = req.getParametersMap().get(EMPTY_FINAL);
            RequestTrace trace = tracer.start(req.getModelName(), traceParent);
            Observer obs = new Observer(req, parsed, efr != null && efr.getBoolParam(), trace, held);
            RequestHandle h = service.stream(trace == RequestTrace.NONE ? parsed.request() : parsed.request().toBuilder().trace(trace).build(), obs);
            obs.handle = h;
            if (!h.isDone()) {
                open.add(h);
                boolean stop;
                synchronized (this) {
                    stop = finished;
                }
                if (h.isDone()) {
                    open.remove(h);
                } else if (stop) {
                    h.cancel();
                }
            }
        }

        @Override
        public void onError(Throwable t) {
            // The client cancelled or the connection broke: cancel what is still running.
            synchronized (this) {
                finished = true;
            }
            streamOver();
            cancelOpen();
        }

        @Override
        public void onCompleted() {
            synchronized (this) {
                halfClosed = true;
                maybeFinish();
            }
        }

        private void cancelOpen() {
            for (RequestHandle h : open) {
                h.cancel();
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
                streamOver();
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

        /** An error: in the stream as {@code inStream}, or with triton_grpc_error as the status that ends the stream. */
        private void fail(Throwable t, ModelStreamInferResponse inStream) {
            if (!grpcError) {
                send(inStream);
                return;
            }
            synchronized (this) {
                if (finished) {
                    return;
                }
                finished = true;
                try {
                    out.onError(status(t));
                } catch (RuntimeException e) {
                    log.debug("stream already closed: {}", e.toString());
                }
            }
            streamOver();
            cancelOpen();
        }

        private synchronized void ended(@Nullable RequestHandle h, ProtoTensors.@Nullable Parsed parsed) {
            if (h != null) {
                open.remove(h);
            }
            if (parsed != null) {
                parsed.release();
            }
            inFlight--;
            maybeFinish();
        }

        private final class Observer implements ResponseObserver {
            private final ModelInferRequest req;
            private final ProtoTensors.Parsed parsed;
            private final boolean emptyFinal;
            private final RequestTrace trace;
            private final MemoryReservation held;
            private volatile @Nullable Throwable failure;
            volatile @Nullable RequestHandle handle;

            Observer(ModelInferRequest req, ProtoTensors.Parsed parsed, boolean emptyFinal, RequestTrace trace, MemoryReservation held) {
                this.req = req;
                this.held = held;
                this.parsed = parsed;
                this.emptyFinal = emptyFinal;
                this.trace = trace;
            }

            @Override
            public void onResponse(InferenceResponse response) {
                respond(response, false);
            }

            @Override
            public CompletionStage<Void> ready() {
                return StreamSession.this.ready();
            }

            @Override
            public void onLastResponse(InferenceResponse response) {
                try {
                    respond(response, true);
                } finally {
                    done();
                }
            }

            @Override
            public void onComplete() {
                if (emptyFinal) {
                    send(ModelStreamInferResponse.newBuilder().setInferResponse(echo().putParameters(FINAL_RESPONSE, flag(true))).build());
                }
                done();
            }

            @Override
            public void onError(BackplaneException error) {
                failure = error;
                failed(error, true);
                done();
            }

            private void respond(InferenceResponse response, boolean last) {
                BackplaneException e = response.error();
                if (e != null) {
                    failed(e, last);
                    return;
                }
                ModelInferResponse r;
                try {
                    r = ProtoTensors.toResponse(response, parsed.shmOutputs()).toBuilder().putParameters(FINAL_RESPONSE, flag(last)).build();
                } catch (RuntimeException x) {
                    failed(x, last);
                    return;
                }
                send(ModelStreamInferResponse.newBuilder().setInferResponse(r).build());
            }

            /** A failed response: Triton's error message and the request's id, model and version. */
            private void failed(Throwable t, boolean last) {
                fail(t, ModelStreamInferResponse.newBuilder().setErrorMessage(message(t))
                        .setInferResponse(echo().putParameters(FINAL_RESPONSE, flag(last))).build());
            }

            private ModelInferResponse.Builder echo() {
                return ModelInferResponse.newBuilder().setModelName(req.getModelName()).setModelVersion(req.getModelVersion()).setId(req.getId());
            }

            private void done() {
                held.close();
                trace.finish(failure);
                ended(handle, parsed);
            }
        }
    }

    private static final CompletionStage<Void> READY = CompletableFuture.completedStage(null);

    /** Request parameter: send an empty final response when a request ends without a last response. */
    static final String EMPTY_FINAL = "triton_enable_empty_final_response";
    /** Response parameter: whether this response is the last one of its request. */
    static final String FINAL_RESPONSE = "triton_final_response";
    /** Call header: with {@code true}, the first error in a stream ends it with a gRPC status. */
    static final String GRPC_ERROR_HEADER = "triton_grpc_error";

    private static InferParameter flag(boolean value) {
        return InferParameter.newBuilder().setBoolParam(value).build();
    }

    /**
     * Takes the message's size from the host's memory budget (O1) before its tensors are copied out
     * of it; released when the request ends. gRPC has read the message by now: the frontend's
     * {@code max_message_bytes} and connection limit bound what is read before this check.
     */
    private MemoryReservation reserve(ModelInferRequest req) {
        return service.reserveMemory(req.getSerializedSize(), "a gRPC inference request to model '" + req.getModelName() + "'");
    }

    private static String message(Throwable t) {
        if (ProtocolErrors.isUnexpected(t)) {
            log.warn("internal error serving a grpc stream request", ProtocolErrors.unwrap(t));
        }
        return String.valueOf(ProtocolErrors.classify(t).getMessage());
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
