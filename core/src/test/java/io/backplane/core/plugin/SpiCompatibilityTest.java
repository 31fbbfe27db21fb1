package io.backplane.core.plugin;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.testing.Hygiene;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Spi;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.DynamicBatching;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.jar.Attributes;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.jar.Manifest;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A backend compiled at test time against the previous SPI (version 1, when the config types were
 * records: {@code src/test/resources/spi-baseline}), that uses no removed constructor, loads into
 * today's host from a plugin directory and serves: it reads the config through the accessors,
 * changes it through {@code toBuilder()}, builds tensors, and calls the since-deprecated
 * {@code ScheduledRequest.isDone()}. The SPI version comes from the plugin jar's manifest; a jar
 * built against a newer SPI than the host's is refused with both versions named.
 */
class SpiCompatibilityTest {
    @TempDir
    static Path dir;
    static Path baseline;

    private static final String OLD_PLUGIN = """
            package com.example.old;

            import io.backplane.spi.*;
            import io.backplane.spi.config.*;
            import java.util.List;

            public final class OldFactory implements BackendFactory {
                public String name() { return "%s"; }
                public Backend create(BackendContext ctx) {
                    return new Backend() {
                        public ModelConfig autoCompleteConfig(ModelContext m) {
                            return m.config().toBuilder().parameter("completed_by", "old").build();
                        }
                        public Model loadModel(ModelContext m) {
                            ModelConfig c = m.config();
                            TensorConfig in = c.inputs().get(0);
                            DynamicBatching db = c.dynamicBatching();
                            InstanceGroup g = c.instanceGroups().get(0);
                            String facts = c.name() + "|" + c.maxBatchSize() + "|" + in.name() + in.dims() + in.dataType() + "|"
                                    + (db == null ? "none" : db.maxQueueDelayMicros() + "/" + db.defaultQueuePolicy().maxQueueSize()) + "|"
                                    + g.count() + g.kind() + "|" + c.parameters().get("completed_by") + "|host SPI " + ctx.hostSpiVersion();
                            return new Model() {
                                public ModelInstance createInstance(InstanceContext i) {
                                    return new ModelInstance() {
                                        public void execute(List<ScheduledRequest> batch) {
                                            for (ScheduledRequest r : batch) {
                                                if (r.isDone()) {
                                                    continue;
                                                }
                                                Tensor x = r.request().input("IN");
                                                r.sender().sendFinal(InferenceResponse.of(List.of(x.withName("OUT"),
                                                        Tensor.ofStrings("FACTS", new long[] {1}, facts))));
                                            }
                                        }
                                        public void close() {}
                                    };
                                }
                                public void close() {}
                            };
                        }
                        public void close() {}
                    };
                }
            }
            """;

    @BeforeAll
    static void buildPlugins() throws IOException {
        baseline = dir.resolve("backplane-spi-1.jar");
        try (InputStream in = Objects.requireNonNull(SpiCompatibilityTest.class.getResourceAsStream("/spi-baseline/backplane-spi-1.jar"),
                "the SPI baseline jar is a test resource")) {
            Files.copy(in, baseline);
        }
        buildPlugin("nomanifest", null);
        buildPlugin("versionone", "1");
        buildPlugin("fromfuture", Integer.toString(Spi.VERSION + 1));
    }

    /** Compiles the old plugin against the baseline SPI only, into {@code <dir>/backends-<name>/<name>/<name>.jar}. */
    private static void buildPlugin(String name, @Nullable String manifestVersion) throws IOException {
        Path src = dir.resolve("src-" + name).resolve("com/example/old/OldFactory.java");
        Files.createDirectories(src.getParent());
        Files.writeString(src, OLD_PLUGIN.formatted(name));
        Path classes = Files.createDirectories(dir.resolve("classes-" + name));
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int rc = javac.run(null, null, err, "-d", classes.toString(), "-cp", baseline.toString(), "-proc:none", "-Xlint:-options", src.toString());
        assertEquals(0, rc, "the plugin compiles against the SPI 1 baseline: " + err.toString(StandardCharsets.UTF_8));
        Path pluginDir = Files.createDirectories(dir.resolve("backends-" + name).resolve(name));
        Manifest manifest = new Manifest();
        manifest.getMainAttributes().put(Attributes.Name.MANIFEST_VERSION, "1.0");
        if (manifestVersion != null) {
            manifest.getMainAttributes().putValue(Spi.MANIFEST_ATTRIBUTE, manifestVersion);
        }
        try (JarOutputStream jar = new JarOutputStream(Files.newOutputStream(pluginDir.resolve(name + ".jar")), manifest)) {
            try (var files = Files.walk(classes)) {
                for (Path p : files.filter(Files::isRegularFile).toList()) {
                    jar.putNextEntry(new JarEntry(classes.relativize(p).toString().replace('\\', '/')));
                    Files.copy(p, jar);
                    jar.closeEntry();
                }
            }
            jar.putNextEntry(new JarEntry("META-INF/services/io.backplane.spi.BackendFactory"));
            jar.write("com.example.old.OldFactory\n".getBytes(StandardCharsets.UTF_8));
            jar.closeEntry();
        }
    }

    private static ModelConfig model(String backend) {
        return ModelConfig.builder("m").backend(backend).maxBatchSize(4).input(TensorConfig.of("IN", DataType.INT64, 2))
                .output(TensorConfig.of("OUT", DataType.INT64, 2)).output(TensorConfig.of("FACTS", DataType.BYTES, 1))
                .instanceGroup(InstanceGroup.of("g", 2, InstanceKind.CPU, List.of()))
                .dynamicBatching(DynamicBatching.builder().maxQueueDelayMicros(50).build()).build();
    }

    private static List<String> serve(String name) throws Exception {
        try (BackplaneHost host = BackplaneHost.builder().backendsDirectory(dir.resolve("backends-" + name)).model(model(name)).build()) {
            assertTrue(host.backends().contains(name), host.backends().toString());
            InferenceResponse r = host.infer(InferenceRequest.builder("m").input(Tensor.ofLongs("IN", new long[] {1, 2}, 7, 8)).build())
                    .get(30, TimeUnit.SECONDS);
            assertFalse(r.isError(), () -> String.valueOf(r.error()));
            assertEquals(List.of(7L, 8L), java.util.Arrays.stream(Objects.requireNonNull(r.output("OUT")).toLongArray()).boxed().toList());
            Tensor facts = r.output("FACTS");
            assertNotNull(facts);
            return facts.toStringList();
        } finally {
            Hygiene.assertNoBackplaneThreads();
        }
    }

    @Test
    void pluginBuiltAgainstSpi1_withoutManifestVersion_loadsAndServes() throws Exception {
        assertEquals(List.of("m|4|IN[2]INT64|50/0|2CPU|old|host SPI " + Spi.VERSION), serve("nomanifest"));
    }

    @Test
    void pluginBuiltAgainstSpi1_withManifestVersion_loadsAndServes() throws Exception {
        assertEquals(List.of("m|4|IN[2]INT64|50/0|2CPU|old|host SPI " + Spi.VERSION), serve("versionone"));
    }

    @Test
    void pluginBuiltAgainstNewerSpi_isRefused_namingBothVersions() {
        BackplaneHost.Builder b = BackplaneHost.builder().backendsDirectory(dir.resolve("backends-fromfuture"))
                .modelControlMode(ModelControlMode.EXPLICIT).model(model("fromfuture")).loadModel("m");
        BackplaneException e = assertThrows(BackplaneException.class, b::build);
        assertEquals(ErrorCode.NOT_FOUND, e.code());
        assertTrue(e.getMessage().contains("refused") && e.getMessage().contains("SPI version " + (Spi.VERSION + 1))
                && e.getMessage().contains("SPI version " + Spi.VERSION), e.getMessage());
        Hygiene.assertNoBackplaneThreads();
    }
}
