package com.example.textops;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.backplane.spi.BackendFactory;
import io.backplane.testkit.BackendConformanceTest;
import io.backplane.testkit.Capability;
import io.backplane.testkit.ConformanceModel;
import java.nio.file.Path;
import java.util.EnumSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * The same backend, its conformance model read from a Triton-layout repository folder
 * (src/test/resources/models/shout: config.pbtxt and 1/prefix.txt) instead of built in code.
 */
class TextOpsRepositoryConformanceTest extends BackendConformanceTest {
    @Override
    protected BackendFactory backend() {
        return new TextOpsBackendFactory();
    }

    @Override
    protected ConformanceModel model() {
        return ConformanceModel.fromRepository(Path.of("src/test/resources/models"), "shout")
                .request(TextOpsConformanceTest::request)
                .check((request, responses) -> assertEquals(
                        List.of(">" + request.input("TEXT").toStringList().getFirst().toUpperCase(Locale.ROOT)),
                        responses.getFirst().output("RESULT").toStringList()))
                .build();
    }

    @Override
    protected Set<Capability> capabilities() {
        return EnumSet.of(Capability.CANCELLATION);
    }
}
