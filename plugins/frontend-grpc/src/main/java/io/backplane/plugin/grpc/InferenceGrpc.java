package io.backplane.plugin.grpc;

import com.google.protobuf.Message;
import io.backplane.plugin.grpc.proto.ModelConfigRequest;
import io.backplane.plugin.grpc.proto.ModelConfigResponse;
import io.backplane.plugin.grpc.proto.ModelInferRequest;
import io.backplane.plugin.grpc.proto.ModelInferResponse;
import io.backplane.plugin.grpc.proto.ModelMetadataRequest;
import io.backplane.plugin.grpc.proto.ModelMetadataResponse;
import io.backplane.plugin.grpc.proto.ModelReadyRequest;
import io.backplane.plugin.grpc.proto.ModelReadyResponse;
import io.backplane.plugin.grpc.proto.ModelStreamInferResponse;
import io.backplane.plugin.grpc.proto.RepositoryIndexRequest;
import io.backplane.plugin.grpc.proto.RepositoryIndexResponse;
import io.backplane.plugin.grpc.proto.RepositoryModelLoadRequest;
import io.backplane.plugin.grpc.proto.RepositoryModelLoadResponse;
import io.backplane.plugin.grpc.proto.RepositoryModelUnloadRequest;
import io.backplane.plugin.grpc.proto.RepositoryModelUnloadResponse;
import io.backplane.plugin.grpc.proto.ServerLiveRequest;
import io.backplane.plugin.grpc.proto.ServerLiveResponse;
import io.backplane.plugin.grpc.proto.ServerMetadataRequest;
import io.backplane.plugin.grpc.proto.ServerMetadataResponse;
import io.backplane.plugin.grpc.proto.ServerReadyRequest;
import io.backplane.plugin.grpc.proto.ServerReadyResponse;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.MethodDescriptor;
import io.grpc.protobuf.ProtoUtils;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import java.util.concurrent.TimeUnit;

/**
 * The method descriptors of {@code inference.GRPCInferenceService} and a small client, written
 * by hand from grpc_service.proto (what protoc-gen-grpc-java would generate: the same service and
 * method names and protobuf marshallers, so the wire format is identical). Public so that tools
 * (the bench) and tests can call a server without generated stubs.
 */
public final class InferenceGrpc {
    public static final String SERVICE_NAME = "inference.GRPCInferenceService";

    public static final MethodDescriptor<ServerLiveRequest, ServerLiveResponse> SERVER_LIVE =
            unary("ServerLive", ServerLiveRequest.getDefaultInstance(), ServerLiveResponse.getDefaultInstance());
    public static final MethodDescriptor<ServerReadyRequest, ServerReadyResponse> SERVER_READY =
            unary("ServerReady", ServerReadyRequest.getDefaultInstance(), ServerReadyResponse.getDefaultInstance());
    public static final MethodDescriptor<ModelReadyRequest, ModelReadyResponse> MODEL_READY =
            unary("ModelReady", ModelReadyRequest.getDefaultInstance(), ModelReadyResponse.getDefaultInstance());
    public static final MethodDescriptor<ServerMetadataRequest, ServerMetadataResponse> SERVER_METADATA =
            unary("ServerMetadata", ServerMetadataRequest.getDefaultInstance(), ServerMetadataResponse.getDefaultInstance());
    public static final MethodDescriptor<ModelMetadataRequest, ModelMetadataResponse> MODEL_METADATA =
            unary("ModelMetadata", ModelMetadataRequest.getDefaultInstance(), ModelMetadataResponse.getDefaultInstance());
    public static final MethodDescriptor<ModelInferRequest, ModelInferResponse> MODEL_INFER =
            unary("ModelInfer", ModelInferRequest.getDefaultInstance(), ModelInferResponse.getDefaultInstance());
    public static final MethodDescriptor<ModelInferRequest, ModelStreamInferResponse> MODEL_STREAM_INFER =
            MethodDescriptor.<ModelInferRequest, ModelStreamInferResponse>newBuilder().setType(MethodDescriptor.MethodType.BIDI_STREAMING)
                    .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE_NAME, "ModelStreamInfer"))
                    .setRequestMarshaller(ProtoUtils.marshaller(ModelInferRequest.getDefaultInstance()))
                    .setResponseMarshaller(ProtoUtils.marshaller(ModelStreamInferResponse.getDefaultInstance())).build();
    public static final MethodDescriptor<ModelConfigRequest, ModelConfigResponse> MODEL_CONFIG =
            unary("ModelConfig", ModelConfigRequest.getDefaultInstance(), ModelConfigResponse.getDefaultInstance());
    public static final MethodDescriptor<RepositoryIndexRequest, RepositoryIndexResponse> REPOSITORY_INDEX =
            unary("RepositoryIndex", RepositoryIndexRequest.getDefaultInstance(), RepositoryIndexResponse.getDefaultInstance());
    public static final MethodDescriptor<RepositoryModelLoadRequest, RepositoryModelLoadResponse> REPOSITORY_MODEL_LOAD =
            unary("RepositoryModelLoad", RepositoryModelLoadRequest.getDefaultInstance(), RepositoryModelLoadResponse.getDefaultInstance());
    public static final MethodDescriptor<RepositoryModelUnloadRequest, RepositoryModelUnloadResponse> REPOSITORY_MODEL_UNLOAD =
            unary("RepositoryModelUnload", RepositoryModelUnloadRequest.getDefaultInstance(), RepositoryModelUnloadResponse.getDefaultInstance());

    private InferenceGrpc() {
    }

    private static <Q extends Message, R extends Message> MethodDescriptor<Q, R> unary(String name, Q request, R response) {
        return MethodDescriptor.<Q, R>newBuilder().setType(MethodDescriptor.MethodType.UNARY)
                .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE_NAME, name))
                .setRequestMarshaller(ProtoUtils.marshaller(request)).setResponseMarshaller(ProtoUtils.marshaller(response)).build();
    }

    /** A blocking and asynchronous client over a channel; thread-safe. */
    public static final class Client {
        private final Channel channel;
        private final CallOptions options;

        public Client(Channel channel) {
            this(channel, CallOptions.DEFAULT);
        }

        private Client(Channel channel, CallOptions options) {
            this.channel = channel;
            this.options = options;
        }

        /** This client with a deadline on every call. */
        public Client withDeadline(long duration, TimeUnit unit) {
            return new Client(channel, options.withDeadlineAfter(duration, unit));
        }

        public <Q, R> R call(MethodDescriptor<Q, R> method, Q request) {
            return ClientCalls.blockingUnaryCall(channel, method, options, request);
        }

        public <Q, R> void callAsync(MethodDescriptor<Q, R> method, Q request, StreamObserver<R> responses) {
            ClientCall<Q, R> call = channel.newCall(method, options);
            ClientCalls.asyncUnaryCall(call, request, responses);
        }

        /** Opens a ModelStreamInfer stream; returns the observer to send requests on. */
        public StreamObserver<ModelInferRequest> modelStreamInfer(StreamObserver<ModelStreamInferResponse> responses) {
            return ClientCalls.asyncBidiStreamingCall(channel.newCall(MODEL_STREAM_INFER, options), responses);
        }

        public ModelInferResponse modelInfer(ModelInferRequest request) {
            return call(MODEL_INFER, request);
        }
    }
}
