package io.backplane.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.host.ModelMetadata;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Collections;
import java.util.Enumeration;
import java.util.List;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The cpu backend through the real host: Triton-layout repositories (platform onnxruntime_onnx,
 * backend onnxruntime and cpu), auto-complete, a non-ONNX model beside good ones, unload/load
 * cycles, and the backend installed in a plugin directory with its own class loader.
 */
class HostEndToEndTest {
    @TempDir
    Path temp;

    /**
     * Copies committed test models into a fresh repository. dynamic_batching blocks are dropped:
     * the "dynamic" batcher is a separate plugin; without it the host's "none" batcher sends
     * requests one by one (each still with its own batch dimension).
     */
    static Path repository(Path root, String... models) throws IOException {
        Path repo = Files.createDirectories(root.resolve("repo"));
        for (String m : models) {
            Path from = TestModels.dir(m);
            Path to = Files.createDirectories(repo.resolve(m).resolve("1"));
            Files.copy(from.resolve("1/model.onnx"), to.resolve("model.onnx"));
            List<String> lines = Files.readAllLines(from.resolve("config.pbtxt")).stream().filter(l -> !l.startsWith("dynamic_batching")).toList();
            Files.write(repo.resolve(m).resolve("config.pbtxt"), lines);
        }
        return repo;
    }

    private static InferenceRequest addSub(float x) {
        return TestModels.request("add_sub", Tensor.ofFloats("INPUT0", new long[] {1, 4}, x, 2, 3, 4),
                Tensor.ofFloats("INPUT1", new long[] {1, 4}, 1, 1, 1, 1));
    }

    private static InferenceResponse infer(BackplaneHost host, InferenceRequest r) throws Exception {
        return host.infer(r).get(30, TimeUnit.SECONDS);
    }

    @Test
    void host_tritonRepository_servesEveryModelAndReferenceOutputs() throws Exception {
        Path repo = repository(temp, "add_sub", "identity_fp16", "identity_uint32", "identity_bytes", "dynamic_dim");
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).modelControlMode(ModelControlMode.NONE).build()) {
            for (String m : List.of("add_sub", "identity_fp16", "identity_uint32", "identity_bytes", "dynamic_dim")) {
                assertTrue(host.isModelReady(m), m + " not ready");
                for (TestModels.Case c : TestModels.references(m)) {
                    InferenceResponse r = infer(host, InferenceRequest.builder(m).inputs(c.inputs()).build());
                    for (int i = 0; i < c.outputs().size(); i++) {
                        TestModels.assertTensorEquals(c.outputs().get(i), r.outputs().get(i));
                    }
                }
            }
            assertEquals(0, host.openRequests());
        }
        assertEquals(0, OnnxModel.openSessions(), "host close left sessions open");
    }

    /** Routing under concurrency: many callers, two instances, unique payloads; every caller gets its own sums, exactly once. */
    @Test
    void host_manyConcurrentCallers_eachGetsItsOwnResult() throws Exception {
        Path repo = repository(temp, "add_sub");
        Path config = repo.resolve("add_sub/config.pbtxt");
        Files.writeString(config, Files.readString(config).replace("count: 1", "count: 2"));
        int threads = 8;
        int perThread = 150;
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).loadModel("add_sub").build()) {
            java.util.concurrent.CountDownLatch start = new java.util.concurrent.CountDownLatch(1);
            java.util.concurrent.atomic.AtomicInteger ok = new java.util.concurrent.atomic.AtomicInteger();
            List<Thread> callers = new java.util.ArrayList<>();
            java.util.concurrent.ConcurrentLinkedQueue<Throwable> failures = new java.util.concurrent.ConcurrentLinkedQueue<>();
            for (int t = 0; t < threads; t++) {
                int caller = t;
                callers.add(Thread.ofPlatform().name("caller-" + t).start(() -> {
                    try {
                        start.await();
                        for (int i = 0; i < perThread; i++) {
                            float x = caller * 10_000 + i;
                            InferenceResponse r = infer(host, addSub(x));
                            float[] sum = r.output("OUTPUT0").toFloatArray();
                            float[] diff = r.output("OUTPUT1").toFloatArray();
                            if (sum[0] != x + 1 || sum[3] != 5 || diff[0] != x - 1) {
                                throw new AssertionError("caller " + caller + " request " + i + " got " + java.util.Arrays.toString(sum));
                            }
                            ok.incrementAndGet();
                        }
                    } catch (Throwable e) {
                        failures.add(e);
                    }
                }));
            }
            start.countDown();
            for (Thread c : callers) {
                c.join(60_000);
            }
            assertTrue(failures.isEmpty(), () -> "failures: " + failures);
            assertEquals(threads * perThread, ok.get());
            assertEquals(0, host.openRequests());
        }
        assertEquals(0, OnnxModel.openSessions());
    }

    @Test
    void host_wrongShape_failsTheFutureWithInvalidArgument() throws Exception {
        Path repo = repository(temp, "add_sub");
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).loadModel("add_sub").build()) {
            InferenceRequest bad = TestModels.request("add_sub", Tensor.ofFloats("INPUT0", new long[] {1, 3}, 1, 2, 3),
                    Tensor.ofFloats("INPUT1", new long[] {1, 3}, 1, 2, 3));
            CompletionException e = assertThrows(CompletionException.class, () -> host.infer(bad).join());
            BackplaneException cause = (BackplaneException) e.getCause();
            assertEquals(ErrorCode.INVALID_ARGUMENT, cause.code());
            assertTrue(cause.getMessage().contains("INPUT0"), cause.getMessage());
            assertEquals(6f, infer(host, addSub(5)).output("OUTPUT0").toFloatArray()[0], "the next request succeeds");
        }
    }

    @Test
    void host_configWithoutTensors_autoCompletedFromModel() throws Exception {
        Path repo = repository(temp, "add_sub");
        Files.writeString(repo.resolve("add_sub/config.pbtxt"), "backend: \"cpu\"\nmax_batch_size: 8\n");
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).loadModel("add_sub").build()) {
            ModelMetadata md = host.metadata("add_sub");
            assertEquals(List.of("INPUT0", "INPUT1"), md.inputs().stream().map(ModelMetadata.TensorMetadata::name).toList());
            assertEquals(DataType.FP32, md.outputs().getFirst().datatype());
            assertEquals("cpu", md.backend(), "the backend the config names is kept");
            assertEquals("onnxruntime_onnx", md.platform());
            assertEquals(8f, infer(host, addSub(7)).output("OUTPUT0").toFloatArray()[0]);
        }
    }

    @Test
    void host_configNamingTheOnnxruntimeAlias_loadsTheCpuBackend_andReportsTritonsNames() throws Exception {
        Path repo = repository(temp, "add_sub");
        Files.writeString(repo.resolve("add_sub/config.pbtxt"), "backend: \"onnxruntime\"\n");
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).loadModel("add_sub").build()) {
            ModelMetadata md = host.metadata("add_sub");
            assertEquals("onnxruntime", md.backend());
            assertEquals("onnxruntime_onnx", md.platform());
            assertEquals(4f, infer(host, addSub(3)).output("OUTPUT0").toFloatArray()[0]);
        }
    }

    @Test
    void host_noConfigAtAll_backendInferredAndTensorsFilled() throws Exception {
        Path repo = repository(temp, "add_sub");
        Files.delete(repo.resolve("add_sub/config.pbtxt"));
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).loadModel("add_sub").build()) {
            ModelMetadata md = host.metadata("add_sub");
            assertEquals(List.of(-1L, 4L), md.inputs().getFirst().shape(), "max_batch_size 0: the model's own shape");
            assertEquals("onnxruntime", md.backend(), "Triton's backend name, not ours");
            assertEquals("onnxruntime_onnx", md.platform());
            assertEquals(4f, infer(host, addSub(3)).output("OUTPUT0").toFloatArray()[0]);
        }
    }

    /**
     * default_model_filename naming a folder (Triton's layout for external weights) whose model.onnx
     * is a link out of the repository; the folder is hidden, which the host's check of the model
     * folder does not walk into: the backend's own check refuses it, naming the link; the host's
     * option serves it.
     */
    @Test
    void host_defaultModelFilenameLinkingOutOfTheRepository_isRefusedUnlessAllowed() throws Exception {
        Path repo = repository(temp, "add_sub");
        Path outside = Files.createDirectories(temp.resolve("outside"));
        Path link = Files.createDirectories(repo.resolve("add_sub/1/.m")).resolve("model.onnx");
        Files.move(repo.resolve("add_sub/1/model.onnx"), outside.resolve("model.onnx"));
        Files.createSymbolicLink(link, outside.resolve("model.onnx"));
        Path config = repo.resolve("add_sub/config.pbtxt");
        Files.writeString(config, Files.readString(config) + "default_model_filename: \".m\"\n");
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).modelControlMode(ModelControlMode.EXPLICIT).build()) {
            BackplaneException e = assertThrows(BackplaneException.class, () -> host.load("add_sub"));
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code(), e.getMessage());
            assertTrue(e.getMessage().contains("default_model_filename '.m' " + link + " is a symbolic link to " + outside.resolve("model.onnx"))
                    && e.getMessage().contains("outside the model repository " + repo) && e.getMessage().contains("--allow-links-outside-repository"),
                    e.getMessage());
            assertFalse(host.isModelReady("add_sub"));
        }
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).modelControlMode(ModelControlMode.EXPLICIT)
                .allowLinksOutsideRepository(true).build()) {
            host.load("add_sub");
            assertEquals(2f, infer(host, addSub(1)).output("OUTPUT0").toFloatArray()[0]);
        }
    }

    @Test
    void host_notOnnxModel_failsItsLoadAndOthersKeepServing() throws Exception {
        Path repo = repository(temp, "add_sub", "not_onnx");
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).loadModel("add_sub").build()) {
            BackplaneException e = assertThrows(BackplaneException.class, () -> host.load("not_onnx"));
            assertTrue(e.getMessage().contains("as an ONNX model"), e.getMessage());
            assertFalse(host.isModelReady("not_onnx"));
            assertTrue(host.isModelReady("add_sub"));
            assertEquals(2f, infer(host, addSub(1)).output("OUTPUT0").toFloatArray()[0]);
        }
    }

    @Test
    void host_unloadAndLoadAgain_manyTimes_servesAndFreesSessions() throws Exception {
        Path repo = repository(temp, "add_sub");
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).modelControlMode(ModelControlMode.EXPLICIT)
                .unloadTimeout(Duration.ofSeconds(5)).build()) {
            for (int i = 0; i < 20; i++) {
                host.load("add_sub");
                assertEquals(i + 1f, infer(host, addSub(i)).output("OUTPUT0").toFloatArray()[0]);
                host.unload("add_sub");
                assertEquals(0, OnnxModel.openSessions(), "cycle " + i);
            }
        }
    }

    /** The backend jar plus the ONNX Runtime jar in a plugin directory: the host's own PluginClassLoader runs it. */
    @Test
    void host_backendInPluginDirectory_loadsOrtInPluginLoaderAndServesAfterReload() throws Exception {
        Path plugins = Files.createDirectories(temp.resolve("backends/cpu"));
        jar(Path.of(OnnxBackendFactory.class.getProtectionDomain().getCodeSource().getLocation().toURI()), plugins.resolve("backplane-backend-cpu.jar"));
        Path ort = ClassLoaderIsolationTest.ortJar();
        Files.createSymbolicLink(plugins.resolve(ort.getFileName()), ort);
        Path repo = repository(temp, "add_sub");
        // The host's class path hides its BackendFactory registrations, so the only cpu backend is the plugin's.
        ClassLoader noClassPathBackends = new ClassLoader("no-class-path-backends", HostEndToEndTest.class.getClassLoader()) {
            @Override
            public Enumeration<URL> getResources(String name) throws IOException {
                return name.equals("META-INF/services/io.backplane.spi.BackendFactory") ? Collections.emptyEnumeration() : super.getResources(name);
            }
        };
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).backendsDirectory(temp.resolve("backends"))
                .classLoader(noClassPathBackends).modelControlMode(ModelControlMode.EXPLICIT).build()) {
            assertEquals(0, OnnxModel.openSessions(), "this class's copy of the backend is not the one serving");
            for (int i = 0; i < 3; i++) {
                host.load("add_sub");
                assertEquals(10f + i, infer(host, addSub(9 + i)).output("OUTPUT0").toFloatArray()[0]);
                assertEquals(0, OnnxModel.openSessions(), "the session is the plugin copy's, not this class loader's");
                host.unload("add_sub");
            }
        }
    }

    /** Packs a classes folder into a jar. */
    static void jar(Path classes, Path jar) throws IOException {
        try (JarOutputStream out = new JarOutputStream(Files.newOutputStream(jar)); Stream<Path> s = Files.walk(classes)) {
            for (Path p : s.filter(Files::isRegularFile).sorted().toList()) {
                out.putNextEntry(new JarEntry(classes.relativize(p).toString().replace('\\', '/')));
                Files.copy(p, (OutputStream) out);
                out.closeEntry();
            }
        }
    }
}
