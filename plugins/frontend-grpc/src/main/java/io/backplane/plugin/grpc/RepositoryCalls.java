package io.backplane.plugin.grpc;

import static io.backplane.plugin.grpc.GrpcCalls.status;

import io.backplane.protocol.LoadParameters;
import io.backplane.protocol.inference.ModelRepositoryParameter;
import io.backplane.spi.host.LoadOverride;
import io.backplane.protocol.inference.RepositoryIndexRequest;
import io.backplane.protocol.inference.RepositoryIndexResponse;
import io.backplane.protocol.inference.RepositoryModelLoadRequest;
import io.backplane.protocol.inference.RepositoryModelLoadResponse;
import io.backplane.protocol.inference.RepositoryModelUnloadRequest;
import io.backplane.protocol.inference.RepositoryModelUnloadResponse;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.host.InferenceService;
import io.backplane.spi.host.ModelState;
import io.backplane.spi.host.ModelStatus;
import io.grpc.stub.StreamObserver;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.function.Supplier;

import static io.backplane.plugin.grpc.GrpcCalls.unary;

/** Triton's repository extension: index, load (with its {@code config} and {@code file:} parameters) and unload. */
final class RepositoryCalls {
    private final InferenceService service;
    private final ExecutorService admin;

    RepositoryCalls(InferenceService service, ExecutorService admin) {
        this.service = service;
        this.admin = admin;
    }

    void repositoryIndex(RepositoryIndexRequest req, StreamObserver<RepositoryIndexResponse> obs) {
        unary(obs, () -> {
            checkRepositoryName(req.getRepositoryName());
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

    /**
     * Triton's load: {@code config} and {@code file:} parameters; the model name is checked by the
     * host (Triton's rule and message). Errors carry Triton's gRPC codes: a bad parameter or config
     * INVALID_ARGUMENT, {@code repository_name} UNIMPLEMENTED, a load outside explicit mode
     * UNAVAILABLE, a name not in the repository NOT_FOUND.
     */
    void repositoryModelLoad(RepositoryModelLoadRequest req, StreamObserver<RepositoryModelLoadResponse> obs) {
        LoadOverride override;
        try {
            checkRepositoryName(req.getRepositoryName());
            override = loadOverride(req);
        } catch (RuntimeException e) {
            obs.onError(status(e));
            return;
        }
        repositoryCall(obs, () -> {
            service.load(req.getModelName(), override);
            return RepositoryModelLoadResponse.getDefaultInstance();
        });
    }

    /** Triton's unload: the one parameter {@code unload_dependents} (a bool_param); another key is UNIMPLEMENTED, naming it. */
    void repositoryModelUnload(RepositoryModelUnloadRequest req, StreamObserver<RepositoryModelUnloadResponse> obs) {
        boolean dependents;
        try {
            checkRepositoryName(req.getRepositoryName());
            if (req.getModelName().isEmpty()) {
                throw BackplaneException.invalid("model_name is empty; name the model to unload");
            }
            dependents = unloadDependents(req);
        } catch (RuntimeException e) {
            obs.onError(status(e));
            return;
        }
        repositoryCall(obs, () -> {
            service.unload(req.getModelName(), dependents);
            return RepositoryModelUnloadResponse.getDefaultInstance();
        });
    }

    /** The parameter Triton's unload reads. */
    static final String UNLOAD_DEPENDENTS = "unload_dependents";

    private static boolean unloadDependents(RepositoryModelUnloadRequest req) {
        boolean dependents = false;
        for (Map.Entry<String, ModelRepositoryParameter> e : req.getParametersMap().entrySet()) {
            if (!e.getKey().equals(UNLOAD_DEPENDENTS)) {
                throw new BackplaneException(ErrorCode.UNSUPPORTED, "unload parameter '" + e.getKey() + "' of model '" + req.getModelName()
                        + "' is not supported; an unload takes '" + UNLOAD_DEPENDENTS + "' (a bool_param)");
            }
            if (e.getValue().getParameterChoiceCase() != ModelRepositoryParameter.ParameterChoiceCase.BOOL_PARAM) {
                throw BackplaneException.invalid("invalid value type for '" + UNLOAD_DEPENDENTS + "' parameter, expected bool_param. (got "
                        + e.getValue().getParameterChoiceCase().name().toLowerCase(java.util.Locale.ROOT) + ")");
            }
            dependents = e.getValue().getBoolParam();
        }
        return dependents;
    }

    /** Triton serves one repository namespace: a named repository is UNIMPLEMENTED, with Triton's sentence. */
    static void checkRepositoryName(String name) {
        if (!name.isEmpty()) {
            throw new BackplaneException(ErrorCode.UNSUPPORTED, "'repository_name' specification is not supported (got '" + name
                    + "'; leave it empty: this server serves its repositories as one)");
        }
    }

    /** Triton's load parameters: {@code config} (string_param, JSON) and {@code file:<path>} (bytes_param). */
    private static LoadOverride loadOverride(RepositoryModelLoadRequest req) {
        LoadParameters lp = LoadParameters.of(req.getModelName());
        for (Map.Entry<String, ModelRepositoryParameter> e : req.getParametersMap().entrySet()) {
            ModelRepositoryParameter p = e.getValue();
            switch (p.getParameterChoiceCase()) {
                case STRING_PARAM -> {
                    if (e.getKey().startsWith(LoadParameters.FILE_PREFIX)) {
                        throw lp.wrongGrpcType(e.getKey(), "string_param");
                    }
                    lp.text(e.getKey(), p.getStringParam());
                }
                case BYTES_PARAM -> {
                    if (e.getKey().equals(LoadParameters.CONFIG)) {
                        throw lp.wrongGrpcType(e.getKey(), "bytes_param");
                    }
                    lp.bytes(e.getKey(), p.getBytesParam().toByteArray());
                }
                default -> throw lp.wrongGrpcType(e.getKey(), p.getParameterChoiceCase().name().toLowerCase(java.util.Locale.ROOT));
            }
        }
        return lp.override();
    }

    private <R> void repositoryCall(StreamObserver<R> obs, Supplier<R> body) {
        try {
            admin.execute(() -> unary(obs, body));
        } catch (RejectedExecutionException e) {
            obs.onError(status(BackplaneException.unavailable("the grpc frontend is shutting down")));
        }
    }

}
