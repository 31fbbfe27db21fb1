package io.backplane.plugin.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.InferParameter;
import io.backplane.protocol.inference.ModelInferRequest;
import io.grpc.HasByteBuffer;
import io.grpc.KnownLength;
import io.grpc.MethodDescriptor;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The ModelInfer request marshaller that puts large raw inputs in native memory: the same message as the generated parser's. */
class NativeRawInputsTest {
    private static final MethodDescriptor.Marshaller<ModelInferRequest> GENERATED = GRPCInferenceServiceGrpc.getModelInferMethod()
            .getRequestMarshaller();

    @SuppressWarnings("unchecked")
    private static MethodDescriptor.Marshaller<ModelInferRequest> marshaller() {
        ServerServiceDefinition def = NativeRawInputs.of(ServerServiceDefinition.builder(
                io.grpc.ServiceDescriptor.newBuilder("inference.GRPCInferenceService").addMethod(GRPCInferenceServiceGrpc.getModelInferMethod()).build())
                .addMethod(GRPCInferenceServiceGrpc.getModelInferMethod(), (call, headers) -> {
                    throw new UnsupportedOperationException();
                }).build());
        return (MethodDescriptor.Marshaller<ModelInferRequest>) def.getMethod(GRPCInferenceServiceGrpc.getModelInferMethod().getFullMethodName())
                .getMethodDescriptor().getRequestMarshaller();
    }

    /** Like grpc's transport stream: its length known, its bytes exposed as buffers of {@code chunk} bytes (null: not exposed). */
    private static final class TransportStream extends ByteArrayInputStream implements KnownLength, HasByteBuffer {
        private final int chunk;

        TransportStream(byte[] b, int chunk) {
            super(b);
            this.chunk = chunk;
        }

        @Override
        public boolean byteBufferSupported() {
            return chunk > 0;
        }

        @Override
        public ByteBuffer getByteBuffer() {
            return ByteBuffer.wrap(buf, pos, Math.min(chunk, count - pos)).slice().asReadOnlyBuffer();
        }
    }

    private static ModelInferRequest request(int... rawSizes) {
        Random rnd = new Random(rawSizes.length);
        ModelInferRequest.Builder b = ModelInferRequest.newBuilder().setModelName("m").setModelVersion("1").setId("r1")
                .putParameters("priority", InferParameter.newBuilder().setInt64Param(3).build());
        for (int i = 0; i < rawSizes.length; i++) {
            b.addInputsBuilder().setName("IN" + i).setDatatype("FP32").addShape(rawSizes[i] / 4);
            byte[] data = new byte[rawSizes[i]];
            rnd.nextBytes(data);
            b.addRawInputContents(ByteString.copyFrom(data));
        }
        b.addOutputsBuilder().setName("OUT0");
        return b.build();
    }

    @Test
    void parse_smallAndLargeRawInputs_equalsTheGeneratedParse_largeOnesNativeAndAligned() throws Exception {
        assertTrue(NativeRawInputs.available(), "malloc through the FFM linker");
        ModelInferRequest sent = request(12, 602_112, 100, NativeRawInputs.NATIVE_MIN_BYTES, 6_015_168);
        byte[] wire = sent.toByteArray();
        for (int chunk : new int[] {0, 16 * 1024, 1 << 20}) {
            ModelInferRequest got = marshaller().parse(new TransportStream(wire, chunk));
            assertEquals(sent, got, "chunk " + chunk);
            assertEquals(GENERATED.parse(new ByteArrayInputStream(wire)), got);
            for (int i = 0; i < sent.getRawInputContentsCount(); i++) {
                ByteBuffer bb = got.getRawInputContents(i).asReadOnlyByteBuffer();
                boolean large = sent.getRawInputContents(i).size() >= NativeRawInputs.NATIVE_MIN_BYTES;
                assertEquals(large, bb.isDirect(), "raw entry " + i + " of " + bb.remaining() + " bytes");
                if (large) {
                    assertEquals(0, java.lang.foreign.MemorySegment.ofBuffer(bb).address() % 8, "aligned for any element type");
                }
            }
        }
    }

    @Test
    void parse_truncatedOrPaddedMessage_internalInvalidProtobuf_likeTheGeneratedMarshaller() {
        byte[] wire = request(200_000).toByteArray();
        for (byte[] bad : new byte[][] {Arrays.copyOf(wire, wire.length - 10), Arrays.copyOf(wire, 40), new byte[] {(byte) 0x3b, 1, 2}}) {
            StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> marshaller().parse(new TransportStream(bad, 4096)));
            assertEquals(Status.Code.INTERNAL, e.getStatus().getCode());
            assertEquals("Invalid protobuf byte sequence", e.getStatus().getDescription());
        }
    }

    @Test
    void parse_streamOfUnknownLength_takesTheWrappedPath() {
        ModelInferRequest sent = request(100_000);
        InputStream plain = new java.io.FilterInputStream(new ByteArrayInputStream(sent.toByteArray())) {
        };
        ModelInferRequest got = marshaller().parse(plain);
        assertEquals(sent, got);
        assertFalse(got.getRawInputContents(0).asReadOnlyByteBuffer().isDirect());
    }
}
