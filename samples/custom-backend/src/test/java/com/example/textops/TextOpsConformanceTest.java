package com.example.textops;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.backplane.spi.BackendFactory;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import io.backplane.testkit.BackendConformanceTest;
import io.backplane.testkit.Capability;
import io.backplane.testkit.ConformanceModel;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;

/** The textops backend passes the Backplane conformance kit: this is all a backend author writes. */
class TextOpsConformanceTest extends BackendConformanceTest {
    /** A model in code: TEXT → RESULT, upper-cased, with the prefix from its version folder. */
    static ModelConfig shout() {
        return ModelConfig.builder("shout").backend(TextOpsBackendFactory.NAME).parameter("op", "upper")
                .input(TensorConfig.of("TEXT", DataType.BYTES, 1)).output(TensorConfig.of("RESULT", DataType.BYTES, 1)).build();
    }

    static InferenceRequest request(long tag) {
        return InferenceRequest.builder("shout").input(Tensor.ofStrings("TEXT", new long[] {1}, "hello-" + tag)).build();
    }

    @Override
    protected BackendFactory backend() {
        return new TextOpsBackendFactory();
    }

    @Override
    protected ConformanceModel model() {
        return ConformanceModel.builder(shout())
                .versionFile("prefix.txt", ">")
                .request(TextOpsConformanceTest::request)
                .check((request, responses) -> {
                    String sent = request.input("TEXT").toStringList().getFirst();
                    InferenceResponse r = responses.getFirst();
                    assertEquals(List.of(">" + sent.toUpperCase(java.util.Locale.ROOT)), r.output("RESULT").toStringList());
                })
                .failingRequest(tag -> request(tag).toBuilder().parameter("fail", true).build())
                .build();
    }

    @Override
    protected Set<Capability> capabilities() {
        return EnumSet.of(Capability.CANCELLATION);
    }
}
