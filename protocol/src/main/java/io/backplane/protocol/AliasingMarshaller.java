package io.backplane.protocol;

import com.google.protobuf.CodedInputStream;
import com.google.protobuf.ExtensionRegistryLite;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.MessageLite;
import com.google.protobuf.Parser;
import com.google.protobuf.UnsafeByteOperations;
import io.grpc.KnownLength;
import io.grpc.MethodDescriptor;
import io.grpc.ServerMethodDefinition;
import io.grpc.ServerServiceDefinition;
import io.grpc.ServiceDescriptor;
import io.grpc.Status;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.List;

/**
 * A gRPC message marshaller that reads a message into one array of its own and parses it with
 * aliasing, so the message's {@code bytes} fields ({@code raw_input_contents},
 * {@code raw_output_contents}) are views of that array, not copies of it.
 *
 * <p>Why: grpc-java's protobuf marshaller copies every message twice on the way in — into a
 * reused per-thread array, then each {@code bytes} field out of it — and a message over 4 MiB is
 * parsed from the stream itself, 4 KiB at a time, which for a 6 MB tensor cost more than the
 * model. Here the transport's buffers are copied once, into an array the message then owns (it
 * lives as long as any field taken from it, and is never written after parsing).
 *
 * <p>Requires the generated protobuf marshaller ({@link MethodDescriptor.PrototypeMarshaller} of a
 * {@link MessageLite}); messages are written by that marshaller unchanged. A stream whose length is
 * unknown is parsed by it too. A message that does not parse fails as the generated marshaller
 * fails it ({@code INTERNAL: Invalid protobuf byte sequence}). Thread-safe.
 */
public final class AliasingMarshaller<T extends MessageLite> implements MethodDescriptor.PrototypeMarshaller<T> {
    private final MethodDescriptor.PrototypeMarshaller<T> delegate;
    private final Parser<T> parser;

    private AliasingMarshaller(MethodDescriptor.PrototypeMarshaller<T> delegate, Parser<T> parser) {
        this.delegate = delegate;
        this.parser = parser;
    }

    /** {@code definition} with every method's marshallers made aliasing ({@link #of(MethodDescriptor)}); the handlers are kept. */
    public static ServerServiceDefinition of(ServerServiceDefinition definition) {
        ServiceDescriptor sd = definition.getServiceDescriptor();
        List<ServerMethodDefinition<?, ?>> methods = new ArrayList<>();
        for (ServerMethodDefinition<?, ?> m : definition.getMethods()) {
            methods.add(of(m));
        }
        ServiceDescriptor.Builder aliased = ServiceDescriptor.newBuilder(sd.getName()).setSchemaDescriptor(sd.getSchemaDescriptor());
        methods.forEach(m -> aliased.addMethod(m.getMethodDescriptor()));
        ServerServiceDefinition.Builder out = ServerServiceDefinition.builder(aliased.build());
        methods.forEach(out::addMethod);
        return out.build();
    }

    private static <Q, R> ServerMethodDefinition<Q, R> of(ServerMethodDefinition<Q, R> m) {
        return ServerMethodDefinition.create(of(m.getMethodDescriptor()), m.getServerCallHandler());
    }

    /** {@code method} with both marshallers made aliasing where they are generated protobuf marshallers; others are kept. */
    public static <Q, R> MethodDescriptor<Q, R> of(MethodDescriptor<Q, R> method) {
        return method.toBuilder(wrap(method.getRequestMarshaller()), wrap(method.getResponseMarshaller())).build();
    }

    /** {@code marshaller} made aliasing when it is a generated protobuf marshaller; otherwise {@code marshaller} itself. */
    @SuppressWarnings("unchecked")
    public static <T> MethodDescriptor.Marshaller<T> wrap(MethodDescriptor.Marshaller<T> marshaller) {
        if (marshaller instanceof AliasingMarshaller<?>) {
            return marshaller;
        }
        if (marshaller instanceof MethodDescriptor.PrototypeMarshaller<T> p && p.getMessagePrototype() instanceof MessageLite m) {
            return (MethodDescriptor.Marshaller<T>) new AliasingMarshaller<>((MethodDescriptor.PrototypeMarshaller<MessageLite>) p,
                    (Parser<MessageLite>) m.getParserForType());
        }
        return marshaller;
    }

    @Override
    public Class<T> getMessageClass() {
        return delegate.getMessageClass();
    }

    @Override
    public T getMessagePrototype() {
        return delegate.getMessagePrototype();
    }

    @Override
    public InputStream stream(T value) {
        return delegate.stream(value);
    }

    @Override
    public T parse(InputStream stream) {
        if (!(stream instanceof KnownLength)) {
            return delegate.parse(stream);
        }
        byte[] bytes;
        try {
            int size = stream.available();
            bytes = new byte[size];
            int read = 0;
            for (int n; read < size && (n = stream.read(bytes, read, size - read)) > 0; ) { // bulk copies, not InputStream.readNBytes' chunks
                read += n;
            }
            if (read != size || stream.read() != -1) {
                throw new IOException("message size inaccurate: " + size + " announced, " + read + " or more read");
            }
        } catch (IOException e) {
            throw Status.INTERNAL.withDescription("reading a message failed: " + e.getMessage()).withCause(e).asRuntimeException();
        }
        // through a ByteString: only a decoder over memory it may treat as immutable aliases (CodedInputStream.newInstance(byte[]) copies)
        CodedInputStream in = UnsafeByteOperations.unsafeWrap(bytes).newCodedInput();
        in.enableAliasing(true);
        in.setSizeLimit(Integer.MAX_VALUE);
        try {
            T message = parser.parseFrom(in, ExtensionRegistryLite.getEmptyRegistry());
            in.checkLastTagWas(0);
            return message;
        } catch (InvalidProtocolBufferException e) {
            throw Status.INTERNAL.withDescription("Invalid protobuf byte sequence").withCause(e).asRuntimeException();
        }
    }
}
