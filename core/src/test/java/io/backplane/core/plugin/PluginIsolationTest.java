package io.backplane.core.plugin;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
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
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A plugin compiled at test time into its own jar, in its own backends sub-directory: it loads
 * through its own {@link PluginClassLoader}, runs with that loader as context class loader,
 * shares only the SPI with the host, and cannot see the core or the host's protocol classes (STYLE 6, 7).
 */
class PluginIsolationTest {
    @TempDir
    static Path dir;
    static Path backends;

    private static final String FACTORY = """
            package com.example.plugin;

            import io.backplane.spi.*;
            import java.util.List;

            public final class ProbeFactory implements BackendFactory {
                public String name() { return "probe"; }
                public int spiVersion() { return Spi.VERSION; }
                public Backend create(BackendContext ctx) {
                    return new Backend() {
                        public Model loadModel(ModelContext m) {
                            return new Model() {
                                public ModelInstance createInstance(InstanceContext i) {
                                    return new ModelInstance() {
                                        public void execute(List<ScheduledRequest> batch) {
                                            String tccl = Thread.currentThread().getContextClassLoader().getName();
                                            String self = ProbeFactory.class.getClassLoader().getName();
                                            String core;
                                            try {
                                                Class.forName("io.backplane.core.BackplaneHost");
                                                core = "visible";
                                            } catch (ClassNotFoundException e) {
                                                core = "hidden";
                                            }
                                            String protocol;
                                            try {
                                                Class.forName("io.backplane.protocol.inference.ModelConfig");
                                                protocol = "visible";
                                            } catch (ClassNotFoundException e) {
                                                protocol = "hidden";
                                            }
                                            String spiSame = String.valueOf(Tensor.class.getClassLoader() != ProbeFactory.class.getClassLoader());
                                            for (ScheduledRequest r : batch) {
                                                r.sender().sendFinal(InferenceResponse.of(List.of(
                                                        Tensor.ofStrings("OUT", new long[] {5}, tccl, self, core, spiSame, protocol))));
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

    private static final String UNREGISTERED = """
            package com.example.hidden;

            import io.backplane.spi.*;

            public final class ForgottenFactory implements BackendFactory {
                public String name() { return "forgotten"; }
                public Backend create(BackendContext ctx) { throw new UnsupportedOperationException(); }
            }
            """;

    /** A plugin that uses Triton's protocol messages, shipping backplane-protocol and protobuf in its own directory. */
    private static final String WIRE = """
            package com.example.wire;

            import io.backplane.protocol.inference.ModelConfig;
            import io.backplane.spi.*;
            import java.util.List;

            public final class WireFactory implements BackendFactory {
                public String name() { return "wire"; }
                public int spiVersion() { return Spi.VERSION; }
                public Backend create(BackendContext ctx) {
                    return new Backend() {
                        public Model loadModel(ModelContext m) {
                            return new Model() {
                                public ModelInstance createInstance(InstanceContext i) {
                                    return new ModelInstance() {
                                        public void execute(List<ScheduledRequest> batch) {
                                            ClassLoader own = WireFactory.class.getClassLoader();
                                            String message = ModelConfig.newBuilder().setName("wire").build().getName();
                                            String protocolOwn = String.valueOf(ModelConfig.class.getClassLoader() == own);
                                            String protobufOwn = String.valueOf(com.google.protobuf.Message.class.getClassLoader() == own);
                                            String spiShared = String.valueOf(Tensor.class.getClassLoader() != own);
                                            for (ScheduledRequest r : batch) {
                                                r.sender().sendFinal(InferenceResponse.of(List.of(
                                                        Tensor.ofStrings("OUT", new long[] {5}, message, protocolOwn, protobufOwn, spiShared,
                                                                Thread.currentThread().getContextClassLoader().getName()))));
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
    static void buildPlugins() throws Exception {
        backends = dir.resolve("backends");
        buildPlugin("probe", "com/example/plugin/ProbeFactory", FACTORY, true);
        buildPlugin("forgotten", "com/example/hidden/ForgottenFactory", UNREGISTERED, false);
        buildPlugin("wire", "com/example/wire/WireFactory", WIRE, true);
        Path lib = Files.createDirectories(backends.resolve("wire/lib"));
        for (Class<?> fromJar : List.of(io.backplane.protocol.inference.ModelConfig.class, com.google.protobuf.Message.class)) {
            Path where = Path.of(fromJar.getProtectionDomain().getCodeSource().getLocation().toURI());
            if (Files.isDirectory(where)) {
                jar(where, lib.resolve(fromJar.getSimpleName() + "-classes.jar"), null);
            } else {
                Files.copy(where, lib.resolve(where.getFileName()));
            }
        }
    }

    private static void buildPlugin(String name, String className, String source, boolean register) throws IOException {
        Path src = dir.resolve("src-" + name).resolve(className + ".java");
        Files.createDirectories(src.getParent());
        Files.writeString(src, source);
        Path classes = dir.resolve("classes-" + name);
        Files.createDirectories(classes);
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        String cp = System.getProperty("java.class.path");
        int rc = javac.run(null, null, null, "-d", classes.toString(), "-cp", cp, src.toString());
        assertEquals(0, rc, "plugin source compiles");
        Path pluginDir = backends.resolve(name);
        Files.createDirectories(pluginDir);
        jar(classes, pluginDir.resolve(name + ".jar"), register ? className.replace('/', '.') : null);
    }

    /** Jars the files under {@code classes}, registering {@code factory} as a BackendFactory when not null. */
    private static void jar(Path classes, Path target, @Nullable String factory) throws IOException {
        try (JarOutputStream jar = new JarOutputStream(Files.newOutputStream(target))) {
            try (var files = Files.walk(classes)) {
                for (Path p : files.filter(Files::isRegularFile).toList()) {
                    jar.putNextEntry(new JarEntry(classes.relativize(p).toString().replace('\\', '/')));
                    Files.copy(p, jar);
                    jar.closeEntry();
                }
            }
            if (factory != null) {
                jar.putNextEntry(new JarEntry("META-INF/services/io.backplane.spi.BackendFactory"));
                OutputStream out = jar;
                out.write((factory + "\n").getBytes(java.nio.charset.StandardCharsets.UTF_8));
                jar.closeEntry();
            }
        }
    }

    private static ModelConfig model(String name, String backend) {
        return ModelConfig.builder(name).backend(backend).input(TensorConfig.of("IN", DataType.INT64, 1))
                .output(TensorConfig.of("OUT", DataType.BYTES, 5)).build();
    }

    @Test
    void pluginBackend_runsInItsOwnLoader_seesSpiButNotCore() throws Exception {
        try (BackplaneHost host = BackplaneHost.builder().backendsDirectory(backends).model(model("p", "probe")).build()) {
            assertTrue(host.backends().contains("probe"), host.backends().toString());
            InferenceResponse r = host.infer(InferenceRequest.builder("p").input(Tensor.ofLongs("IN", new long[] {1}, 1)).build())
                    .get(10, TimeUnit.SECONDS);
            List<String> facts = r.output("OUT").toStringList();
            assertEquals("plugin-probe", facts.get(0), "context class loader during execute");
            assertEquals("plugin-probe", facts.get(1), "the plugin's own loader");
            assertEquals("hidden", facts.get(2), "the core is not visible to plugins");
            assertEquals("true", facts.get(3), "SPI classes come from the host, not the plugin");
            assertEquals("hidden", facts.get(4), "the host's protocol jar is not shared: a plugin that needs it carries its own");
        }
        Hygiene.assertNoBackplaneThreads();
    }

    @Test
    void pluginCarryingTheProtocolJar_usesItsOwnCopy_andStillSharesOnlyTheSpi() throws Exception {
        try (BackplaneHost host = BackplaneHost.builder().backendsDirectory(backends).model(model("w", "wire")).build()) {
            InferenceResponse r = host.infer(InferenceRequest.builder("w").input(Tensor.ofLongs("IN", new long[] {1}, 1)).build())
                    .get(10, TimeUnit.SECONDS);
            List<String> facts = r.output("OUT").toStringList();
            assertEquals("wire", facts.get(0), "the plugin builds Triton messages with its own protocol classes");
            assertEquals("true", facts.get(1), "backplane-protocol comes from the plugin's directory, not from the host");
            assertEquals("true", facts.get(2), "protobuf comes from the plugin's directory, not from the host");
            assertEquals("true", facts.get(3), "SPI classes still come from the host");
            assertEquals("plugin-wire", facts.get(4), "context class loader during execute");
        }
        Hygiene.assertNoBackplaneThreads();
    }

    @Test
    void unknownBackend_listsAvailable_andNamesUnregisteredImplementations() {
        BackplaneHost.Builder b = BackplaneHost.builder().backendsDirectory(backends).modelControlMode(ModelControlMode.EXPLICIT)
                .model(model("x", "forgotten")).loadModel("x");
        BackplaneException e = assertThrows(BackplaneException.class, b::build);
        assertEquals(ErrorCode.NOT_FOUND, e.code());
        assertTrue(e.getMessage().contains("backend 'forgotten', which is not installed"), e.getMessage());
        assertTrue(e.getMessage().contains("probe"), "lists the available backends: " + e.getMessage());
        assertTrue(e.getMessage().contains("com.example.hidden.ForgottenFactory") && e.getMessage().contains("META-INF/services"), e.getMessage());
        Hygiene.assertNoBackplaneThreads();
    }

    @Test
    void unknownBackend_inNoneMode_leavesHostServingOthers() throws Exception {
        try (BackplaneHost host = BackplaneHost.builder().backendsDirectory(backends).model(model("x", "nope")).model(model("p", "probe")).build()) {
            assertTrue(host.isModelReady("p"));
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> host.infer(InferenceRequest.builder("x").input(Tensor.ofLongs("IN", new long[] {1}, 1)).build()).get(5, TimeUnit.SECONDS));
            BackplaneException be = assertInstanceOf(BackplaneException.class, e.getCause());
            assertEquals(ErrorCode.UNAVAILABLE, be.code());
            assertTrue(be.getMessage().contains("not installed"), be.getMessage());
        }
    }

    @Test
    void missingBackendsDirectory_isAClearError() {
        BackplaneException e = assertThrows(BackplaneException.class, () -> BackplaneHost.builder().backendsDirectory(dir.resolve("nope")).build());
        assertTrue(e.getMessage().contains("nope") && e.getMessage().contains("does not exist"), e.getMessage());
    }
}
