package io.backplane.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.TextFormat;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.GrpcServiceProtos;
import io.backplane.protocol.inference.ModelConfig;
import io.grpc.MethodDescriptor;
import io.grpc.ServiceDescriptor;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/** The generated code is Triton's protocol: the whole service, and the whole model configuration. */
class TritonSchemaTest {
    @Test
    void grpcService_generatedStubs_carryEveryTritonRpc_underTritonsServiceName() {
        ServiceDescriptor service = GRPCInferenceServiceGrpc.getServiceDescriptor();
        assertEquals("inference.GRPCInferenceService", service.getName());
        Set<String> methods = service.getMethods().stream().map(MethodDescriptor::getBareMethodName).collect(Collectors.toCollection(TreeSet::new));
        assertEquals(new TreeSet<>(List.of("ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata", "ModelInfer",
                "ModelStreamInfer", "ModelConfig", "ModelStatistics", "RepositoryIndex", "RepositoryModelLoad", "RepositoryModelUnload",
                "SystemSharedMemoryStatus", "SystemSharedMemoryRegister", "SystemSharedMemoryUnregister", "CudaSharedMemoryStatus",
                "CudaSharedMemoryRegister", "CudaSharedMemoryUnregister", "TraceSetting", "LogSettings")), methods);
        assertEquals(MethodDescriptor.MethodType.BIDI_STREAMING, GRPCInferenceServiceGrpc.getModelStreamInferMethod().getType());
        assertEquals(service.getMethods().size(), GrpcServiceProtos.getDescriptor().findServiceByName("GRPCInferenceService").getMethods().size());
    }

    @Test
    void modelConfig_hasEveryTritonTopLevelField_withTritonsNumbers() {
        Descriptor d = ModelConfig.getDescriptor();
        assertEquals("inference.ModelConfig", d.getFullName());
        String fields = d.getFields().stream().sorted((a, b) -> Integer.compare(a.getNumber(), b.getNumber()))
                .map(f -> f.getNumber() + ":" + f.getName()).collect(Collectors.joining(" "));
        assertEquals("1:name 2:platform 3:version_policy 4:max_batch_size 5:input 6:output 7:instance_group 8:default_model_filename"
                + " 9:cc_model_filenames 10:metric_tags 11:dynamic_batching 12:optimization 13:sequence_batching 14:parameters"
                + " 15:ensemble_scheduling 16:model_warmup 17:backend 18:model_operations 19:model_transaction_policy 20:batch_input"
                + " 21:batch_output 23:model_repository_agents 24:response_cache 25:runtime 26:model_metrics", fields);
    }

    @Test
    void modelConfig_parsesATritonConfigUsingFieldsBackplaneDoesNotModel() throws TextFormat.ParseException {
        ModelConfig.Builder b = ModelConfig.newBuilder();
        TextFormat.merge("""
                name: "seq" platform: "tensorrt_plan" max_batch_size: 8
                input [ { name: "IN" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 3, 224, 224 ] } ]
                sequence_batching { max_sequence_idle_microseconds: 5000000 oldest { max_candidate_sequences: 4 } }
                instance_group [ { kind: KIND_GPU count: 2 gpus: [ 0 ] rate_limiter { priority: 2 } } ]
                optimization { cuda { graphs: true } }
                model_warmup [ { name: "w" batch_size: 1 inputs { key: "IN" value: { data_type: TYPE_FP32 dims: [ 3 ] zero_data: true } } } ]
                """, b);
        ModelConfig c = b.build();
        assertEquals(4, c.getSequenceBatching().getOldest().getMaxCandidateSequences());
        assertEquals(2, c.getInstanceGroup(0).getCount());
        assertTrue(c.getInstanceGroup(0).hasCount(), "count keeps presence, so an explicit 0 can be told from an absent count");
        FieldDescriptor format = c.getInput(0).getDescriptorForType().findFieldByName("format");
        assertEquals("FORMAT_NCHW", ((com.google.protobuf.Descriptors.EnumValueDescriptor) c.getInput(0).getField(format)).getName());
    }
}
