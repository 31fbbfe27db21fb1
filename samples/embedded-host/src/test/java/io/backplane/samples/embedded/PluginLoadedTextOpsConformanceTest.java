package io.backplane.samples.embedded;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.backplane.core.BackplaneHost;
import io.backplane.core.plugin.PluginClassLoader;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.Tensor;
import io.backplane.testkit.BackendConformanceTest;
import io.backplane.testkit.Capability;
import io.backplane.testkit.ConformanceModel;
import java.io.IOException;
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Locale;
import java.util.ServiceLoader;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * The conformance kit against the textops backend as shipped: loaded from its plugin directory
 * through the host's {@link PluginClassLoader} (its own Guava, the host's SPI), not from this
 * class path.
 */
class PluginLoadedTextOpsConformanceTest extends BackendConformanceTest {
    private static PluginClassLoader loader;

    @BeforeAll
    static void openPlugin() throws IOException {
        Path dir = PluginDirectoryTest.plugins().resolve("textops");
        List<URL> jars = new ArrayList<>();
        for (Path d : List.of(dir, dir.resolve("lib"))) {
            try (Stream<Path> s = Files.list(d)) {
                for (Path jar : s.filter(p -> p.toString().endsWith(".jar")).sorted().toList()) {
                    jars.add(jar.toUri().toURL());
                }
            }
        }
        loader = new PluginClassLoader("textops", jars, BackplaneHost.class.getClassLoader());
    }

    @AfterAll
    static void closePlugin() throws IOException {
        loader.close();
    }

    private static InferenceRequest request(long tag) {
        return InferenceRequest.builder("shout").input(Tensor.ofStrings("TEXT", new long[] {1}, "plugin-" + tag)).build();
    }

    @Override
    protected BackendFactory backend() {
        for (BackendFactory f : ServiceLoader.load(BackendFactory.class, loader)) {
            if (f.getClass().getClassLoader() == loader && f.name().equals("textops")) {
                return f;
            }
        }
        throw new IllegalStateException("no textops BackendFactory in " + loader);
    }

    @Override
    protected ConformanceModel model() {
        return ConformanceModel.builder(EmbeddedHostApp.shout())
                .request(PluginLoadedTextOpsConformanceTest::request)
                .check((req, responses) -> assertEquals(List.of(req.input("TEXT").toStringList().getFirst().toUpperCase(Locale.ROOT)),
                        responses.getFirst().output("RESULT").toStringList()))
                .failingRequest(tag -> request(tag).toBuilder().parameter("fail", true).build())
                .build();
    }

    @Override
    protected Set<Capability> capabilities() {
        return EnumSet.of(Capability.CANCELLATION);
    }
}
