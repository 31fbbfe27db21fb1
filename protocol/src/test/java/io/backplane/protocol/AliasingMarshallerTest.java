package io.backplane.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.google.protobuf.ByteString;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelInferResponse;
import io.grpc.KnownLength;
import io.grpc.MethodDescriptor;
import io.grpc.ServerMethodDefinition;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.util.Random;
import org.junit.jupiter.api.Test;

class AliasingMarshallerTest {
    /** As gRPC's transport hands a message to a marshaller: its length is known. */
    static final class Framed extends ByteArrayInputStream implements KnownLength {
        Framed(byte[] bytes) {
            super(bytes);
        }
    }

    static final MethodDescriptor<ModelInferRequest, ModelInferResponse> INFER = AliasingMarshaller.of(GRPCInferenceServiceGrpc.getModelInferMethod());

    static ModelInferRequest request(int... sizes) {
        Random r = new Random(7);
        ModelInferRequest.Builder b = ModelInferRequest.newBuilder().setModelName("m").setId("id");
        for (int i = 0; i < sizes.length; i++) {
            byte[] raw = new byte[sizes[i]];
            r.nextBytes(raw);
            b.addInputsBuilder().setName("IN" + i).setDatatype("UINT8").addShape(sizes[i]);
            b.addRawInputContents(ByteString.copyFrom(raw));
        }
        return b.build();
    }

    /** 6 MB is past the 4 MiB above which grpc-java's own marshaller parses from the stream, 4 KiB at a time. */
    @Test
    void parse_knownLength_sameMessageAsWritten_smallAndPastFourMiB() {
        for (ModelInferRequest m : new ModelInferRequest[] {request(), request(3, 0, 602_112), request(6_015_168, 5)}) {
            assertEquals(m, INFER.parseRequest(new Framed(m.toByteArray())));
        }
    }

    @Test
    void parse_unknownLength_delegatesToTheGeneratedMarshaller() {
        ModelInferRequest m = request(1000, 20);
        InputStream plain = new ByteArrayInputStream(m.toByteArray());
        assertEquals(m, INFER.parseRequest(plain));
    }

    @Test
    void parse_malformed_failsAsTheGeneratedMarshallerDoes() {
        byte[] bad = {0x0a, 0x7f, 'x'}; // field 1 claims 127 bytes, 1 follows
        StatusRuntimeException mine = assertThrows(StatusRuntimeException.class, () -> INFER.parseRequest(new Framed(bad)));
        StatusRuntimeException theirs = assertThrows(StatusRuntimeException.class,
                () -> GRPCInferenceServiceGrpc.getModelInferMethod().parseRequest(new Framed(bad)));
        assertEquals(Status.Code.INTERNAL, mine.getStatus().getCode());
        assertEquals(theirs.getStatus().getCode(), mine.getStatus().getCode());
        assertEquals(theirs.getStatus().getDescription(), mine.getStatus().getDescription());
    }

    @Test
    void stream_writesWhatTheGeneratedMarshallerWrites() throws Exception {
        ModelInferResponse r = ModelInferResponse.newBuilder().setModelName("m").addRawOutputContents(ByteString.copyFromUtf8("abc")).build();
        try (InputStream in = INFER.streamResponse(r)) {
            assertEquals(r, ModelInferResponse.parseFrom(in.readAllBytes()));
        }
        assertEquals(r, INFER.parseResponse(new Framed(r.toByteArray())));
    }

    @Test
    void of_serviceDefinition_everyMethodAliasing_handlersKept() {
        ServerServiceDefinition plain = new GRPCInferenceServiceGrpc.GRPCInferenceServiceImplBase() {
        }.bindService();
        ServerServiceDefinition aliased = AliasingMarshaller.of(plain);
        assertEquals(plain.getMethods().size(), aliased.getMethods().size());
        for (ServerMethodDefinition<?, ?> m : plain.getMethods()) {
            ServerMethodDefinition<?, ?> a = aliased.getMethod(m.getMethodDescriptor().getFullMethodName());
            assertSame(m.getServerCallHandler(), a.getServerCallHandler());
            assertInstanceOf(AliasingMarshaller.class, a.getMethodDescriptor().getRequestMarshaller());
        }
        assertSame(plain.getServiceDescriptor().getSchemaDescriptor(), aliased.getServiceDescriptor().getSchemaDescriptor());
    }
}
