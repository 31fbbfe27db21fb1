package io.backplane.plugin.grpc;

import com.google.protobuf.ByteString;
import com.google.protobuf.CodedInputStream;
import com.google.protobuf.ExtensionRegistryLite;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.UnsafeByteOperations;
import io.backplane.protocol.inference.ModelInferRequest;
import io.grpc.HasByteBuffer;
import io.grpc.KnownLength;
import io.grpc.MethodDescriptor;
import io.grpc.ServerMethodDefinition;
import io.grpc.ServerServiceDefinition;
import io.grpc.ServiceDescriptor;
import io.grpc.Status;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * The request marshaller of {@code ModelInfer} and {@code ModelStreamInfer}: each large
 * {@code raw_input_contents} entry is copied once, from the transport's buffers straight into
 * native memory of its own (aligned for any element type), and the parsed message's entry is a
 * view of it. The backend then reads the tensor where it lies (the ONNX backend hands native,
 * aligned memory of a lone request to ONNX Runtime without a copy), where the generic
 * {@link io.backplane.protocol.AliasingMarshaller} gave it a heap array that every native backend
 * copied again (zeroed native memory, then the bytes).
 *
 * <p>How: the message is read field by field (the wire format's tags and lengths); a
 * {@code raw_input_contents} entry of at least {@link #NATIVE_MIN_BYTES} goes to native memory
 * ({@code malloc}, freed by the garbage collector's cleaner once no tensor, request or message
 * refers to it), every other field to one small array that is parsed as usual; the entries are
 * added back in their order. The result equals what the generated parser gives. A stream of
 * unknown length, or a platform without {@code malloc} through the FFM linker, takes the wrapped
 * marshaller's path. Malformed input fails as the generated marshaller fails it
 * ({@code INTERNAL: Invalid protobuf byte sequence}, protobuf's reason as its cause). One
 * difference: an unknown field of the deprecated group wire types (3, 4), which the generated
 * parser would skip, is refused here (no client of this protocol sends one). Thread-safe.
 */
final class NativeRawInputs implements MethodDescriptor.PrototypeMarshaller<ModelInferRequest> {
    /** Smaller entries stay on the heap: below this a native allocation costs more than the copy it saves. */
    static final int NATIVE_MIN_BYTES = 64 * 1024;
    private static final int RAW_INPUT_CONTENTS = 7;
    private static final int LENGTH_DELIMITED = 2;

    private static final @Nullable MethodHandle MALLOC;
    private static final @Nullable MethodHandle FREE;

    static {
        MethodHandle[] h = link();
        MALLOC = h[0] != null && h[1] != null ? h[0] : null;
        FREE = MALLOC != null ? h[1] : null;
    }

    /** {@code malloc} and {@code free} through the FFM linker; nulls where native access is denied or they are not found. */
    @SuppressWarnings("restricted")
    private static @Nullable MethodHandle[] link() {
        try {
            Linker linker = Linker.nativeLinker();
            MethodHandle malloc = linker.defaultLookup().find("malloc").map(a -> linker.downcallHandle(a,
                    FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.JAVA_LONG))).orElse(null);
            MethodHandle free = linker.defaultLookup().find("free").map(a -> linker.downcallHandle(a,
                    FunctionDescriptor.ofVoid(ValueLayout.ADDRESS))).orElse(null);
            return new @Nullable MethodHandle[] {malloc, free};
        } catch (RuntimeException | LinkageError noNativeAccess) {
            return new @Nullable MethodHandle[] {null, null};
        }
    }

    private final MethodDescriptor.Marshaller<ModelInferRequest> fallback;

    private NativeRawInputs(MethodDescriptor.Marshaller<ModelInferRequest> fallback) {
        this.fallback = fallback;
    }

    /** {@code definition} with the request marshaller of every method taking a {@code ModelInferRequest} replaced by this one. */
    static ServerServiceDefinition of(ServerServiceDefinition definition) {
        ServiceDescriptor sd = definition.getServiceDescriptor();
        List<ServerMethodDefinition<?, ?>> methods = new ArrayList<>();
        for (ServerMethodDefinition<?, ?> m : definition.getMethods()) {
            methods.add(wrap(m));
        }
        ServiceDescriptor.Builder b = ServiceDescriptor.newBuilder(sd.getName()).setSchemaDescriptor(sd.getSchemaDescriptor());
        methods.forEach(m -> b.addMethod(m.getMethodDescriptor()));
        ServerServiceDefinition.Builder out = ServerServiceDefinition.builder(b.build());
        methods.forEach(out::addMethod);
        return out.build();
    }

    @SuppressWarnings("unchecked")
    private static <Q, R> ServerMethodDefinition<Q, R> wrap(ServerMethodDefinition<Q, R> m) {
        MethodDescriptor<Q, R> d = m.getMethodDescriptor();
        if (MALLOC == null || !(d.getRequestMarshaller() instanceof MethodDescriptor.PrototypeMarshaller<Q> p)
                || !(p.getMessagePrototype() instanceof ModelInferRequest)) {
            return m;
        }
        MethodDescriptor.Marshaller<Q> mine = (MethodDescriptor.Marshaller<Q>) new NativeRawInputs(
                (MethodDescriptor.Marshaller<ModelInferRequest>) d.getRequestMarshaller());
        return ServerMethodDefinition.create(d.toBuilder(mine, d.getResponseMarshaller()).build(), m.getServerCallHandler());
    }

    /** Whether large raw inputs go to native memory here (else every message takes the wrapped marshaller's path). */
    static boolean available() {
        return MALLOC != null;
    }

    @Override
    public Class<ModelInferRequest> getMessageClass() {
        return ModelInferRequest.class;
    }

    @Override
    public ModelInferRequest getMessagePrototype() {
        return ModelInferRequest.getDefaultInstance();
    }

    @Override
    public InputStream stream(ModelInferRequest value) {
        return fallback.stream(value);
    }

    @Override
    public ModelInferRequest parse(InputStream stream) {
        if (!(stream instanceof KnownLength)) {
            return fallback.parse(stream);
        }
        try {
            return read(stream, stream.available());
        } catch (InvalidProtocolBufferException e) {
            throw Status.INTERNAL.withDescription("Invalid protobuf byte sequence").withCause(e).asRuntimeException();
        } catch (IOException e) {
            throw Status.INTERNAL.withDescription("reading a message failed: " + e.getMessage()).withCause(e).asRuntimeException();
        }
    }

    /** A malformed message, worded as protobuf's own parser words the same faults (the malformed-message answers quote them). */
    private static final class MalformedMessage extends InvalidProtocolBufferException {
        private static final long serialVersionUID = 1L;

        MalformedMessage(String message) {
            super(message);
        }
    }

    private static MalformedMessage truncated() {
        return new MalformedMessage("While parsing a protocol message, the input ended unexpectedly in the middle of a field.  This could mean"
                + " either that the input has been truncated or that an embedded message misreported its own length.");
    }

    private static ModelInferRequest read(InputStream in, int size) throws IOException {
        Reader r = new Reader(in, size);
        ByteArrayOutputStream rest = new ByteArrayOutputStream(Math.min(size, 4096));
        List<ByteString> raw = new ArrayList<>();
        ByteArrayOutputStream tagBytes = new ByteArrayOutputStream(10);
        while (r.remaining > 0) {
            tagBytes.reset();
            long tag = r.varint(tagBytes);
            int field = (int) (tag >>> 3);
            int wire = (int) (tag & 7);
            if (field == RAW_INPUT_CONTENTS && wire == LENGTH_DELIMITED) {
                long len = r.varint(null);
                raw.add(len >= NATIVE_MIN_BYTES ? r.nativeBytes(len) : UnsafeByteOperations.unsafeWrap(r.bytes(len)));
                continue;
            }
            tagBytes.writeTo(rest);
            switch (wire) {
                case 0 -> r.varint(rest);
                case 1 -> r.copy(8, rest);
                case 2 -> r.copy(r.varint(rest), rest);
                case 5 -> r.copy(4, rest);
                default -> throw new MalformedMessage("Protocol message tag had invalid wire type (" + wire + ", field " + field + ")");
            }
        }
        if (in.read() != -1) {
            throw new MalformedMessage("message size inaccurate: more than the " + size + " bytes announced");
        }
        CodedInputStream coded = UnsafeByteOperations.unsafeWrap(rest.toByteArray()).newCodedInput();
        coded.enableAliasing(true);
        coded.setSizeLimit(Integer.MAX_VALUE);
        ModelInferRequest m = ModelInferRequest.parser().parseFrom(coded, ExtensionRegistryLite.getEmptyRegistry());
        coded.checkLastTagWas(0);
        return raw.isEmpty() ? m : m.toBuilder().addAllRawInputContents(raw).build();
    }

    /** Reads the message from the transport's stream, counting what is left of its announced size. */
    private static final class Reader {
        private final InputStream in;
        long remaining;

        Reader(InputStream in, int size) {
            this.in = in;
            this.remaining = size;
        }

        private int next() throws IOException {
            if (remaining <= 0) {
                throw truncated();
            }
            int b = in.read();
            if (b < 0) {
                throw truncated();
            }
            remaining--;
            return b;
        }

        /** A varint, also appended to {@code to} when given. */
        long varint(@Nullable ByteArrayOutputStream to) throws IOException {
            long v = 0;
            for (int shift = 0; shift < 64; shift += 7) {
                int b = next();
                if (to != null) {
                    to.write(b);
                }
                v |= (long) (b & 0x7f) << shift;
                if ((b & 0x80) == 0) {
                    return v;
                }
            }
            throw new MalformedMessage("CodedInputStream encountered a malformed varint.");
        }

        void copy(long n, ByteArrayOutputStream to) throws IOException {
            check(n);
            byte[] chunk = new byte[(int) Math.min(n, 8192)];
            long left = n;
            while (left > 0) {
                int k = in.read(chunk, 0, (int) Math.min(left, chunk.length));
                if (k <= 0) {
                    throw truncated();
                }
                to.write(chunk, 0, k);
                left -= k;
            }
            remaining -= n;
        }

        byte[] bytes(long n) throws IOException {
            check(n);
            byte[] out = new byte[(int) n];
            int read = 0;
            while (read < n) {
                int k = in.read(out, read, (int) n - read);
                if (k <= 0) {
                    throw truncated();
                }
                read += k;
            }
            remaining -= n;
            return out;
        }

        /** {@code n} bytes in native memory of their own, straight from the transport's buffers where it exposes them. */
        ByteString nativeBytes(long n) throws IOException {
            check(n);
            MemorySegment seg = allocate(n);
            long off = 0;
            HasByteBuffer direct = in instanceof HasByteBuffer h && h.byteBufferSupported() ? h : null;
            byte[] chunk = null;
            while (off < n) {
                ByteBuffer bb = direct != null ? direct.getByteBuffer() : null;
                if (bb != null && bb.hasRemaining()) {
                    int k = (int) Math.min(bb.remaining(), n - off);
                    MemorySegment.copy(MemorySegment.ofBuffer(bb), 0, seg, off, k);
                    long skipped = in.skip(k);
                    if (skipped != k) {
                        throw truncated();
                    }
                    off += k;
                    continue;
                }
                if (chunk == null) {
                    chunk = new byte[64 * 1024];
                }
                int k = in.read(chunk, 0, (int) Math.min(chunk.length, n - off));
                if (k <= 0) {
                    throw truncated();
                }
                MemorySegment.copy(MemorySegment.ofArray(chunk), 0, seg, off, k);
                off += k;
            }
            remaining -= n;
            return UnsafeByteOperations.unsafeWrap(seg.asByteBuffer());
        }

        private void check(long n) throws MalformedMessage {
            if (n < 0 || n > Integer.MAX_VALUE - 8) {
                throw new MalformedMessage("CodedInputStream encountered an embedded string or message which claimed to have negative size"
                        + " (" + n + ").");
            }
            if (n > remaining) {
                throw truncated();
            }
        }
    }

    /**
     * {@code n} bytes of native memory from {@code malloc} (aligned for every element type), not
     * zeroed (every byte is written next), freed when the segment becomes unreachable.
     */
    @SuppressWarnings("restricted")
    private static MemorySegment allocate(long n) throws IOException {
        MethodHandle malloc = MALLOC;
        MethodHandle free = FREE;
        if (malloc == null || free == null) {
            throw new IllegalStateException("malloc is not available");
        }
        MemorySegment p;
        try {
            p = (MemorySegment) malloc.invokeExact(n);
        } catch (Throwable t) {
            throw new IOException("malloc(" + n + ") failed", t);
        }
        if (p.equals(MemorySegment.NULL)) {
            throw new OutOfMemoryError("malloc(" + n + ") returned NULL: no native memory for a gRPC raw input of " + n + " bytes");
        }
        return p.reinterpret(n, Arena.ofAuto(), s -> {
            try {
                free.invokeExact(s);
            } catch (Throwable t) {
                throw new IllegalStateException("free failed", t);
            }
        });
    }
}
