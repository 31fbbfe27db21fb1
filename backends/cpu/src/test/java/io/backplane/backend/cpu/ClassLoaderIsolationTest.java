package io.backplane.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;

import io.backplane.spi.BackendFactory;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.testkit.ModelHarness;
import java.io.File;
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Path;
import java.util.ServiceLoader;
import org.junit.jupiter.api.Test;

/**
 * The backend inside isolated plugin class loaders, built the way the host builds them: the
 * backend's classes and the ONNX Runtime jar in a URLClassLoader whose parent is the platform
 * loader plus only {@code io.backplane.spi} and {@code org.slf4j} from the application. This JVM
 * has already loaded ORT in the application loader (the other tests), so every plugin loader here
 * is a second or third loader of the same native library.
 */
class ClassLoaderIsolationTest {

    /** Parent of a plugin loader: the platform loader, plus the shared packages from the application loader. */
    static final class SharedPackagesLoader extends ClassLoader {
        private final ClassLoader app = ClassLoaderIsolationTest.class.getClassLoader();

        SharedPackagesLoader() {
            super("backplane-shared", ClassLoader.getPlatformClassLoader());
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            if (name.startsWith("io.backplane.spi.") || name.startsWith("org.slf4j.") || name.startsWith("org.jspecify.")) {
                return app.loadClass(name);
            }
            return super.loadClass(name, resolve);
        }
    }

    static Path ortJar() {
        for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
            if (Path.of(entry).getFileName().toString().startsWith("onnxruntime-")) {
                return Path.of(entry);
            }
        }
        throw new IllegalStateException("no onnxruntime jar on the test class path");
    }

    static URLClassLoader pluginLoader(String name) throws Exception {
        URL backendClasses = OnnxBackendFactory.class.getProtectionDomain().getCodeSource().getLocation();
        return new URLClassLoader(name, new URL[] {backendClasses, ortJar().toUri().toURL()}, new SharedPackagesLoader());
    }

    private static Object environmentOf(ClassLoader loader) throws Exception {
        Method m = Class.forName("io.backplane.backend.cpu.Ort", true, loader).getDeclaredMethod("environment");
        m.setAccessible(true);
        return m.invoke(null);
    }

    private static void run(ModelHarness h, float seed) throws Exception {
        InferenceResponse response = h.infer(TestModels.request("add_sub", Tensor.ofFloats("INPUT0", new long[] {1, 4}, seed, 2, 3, 4),
                Tensor.ofFloats("INPUT1", new long[] {1, 4}, 1, 1, 1, 1)));
        assertFalse(response.isError(), () -> String.valueOf(response.error()));
        assertEquals(seed + 1, response.output("OUTPUT0").toFloatArray()[0]);
    }

    @Test
    void pluginLoaders_twoAtOnceBesideTheAppLoader_eachLoadsOrtAndServes() throws Exception {
        Object appEnvironment = Ort.environment(); // the application loader holds the library first
        try (URLClassLoader a = pluginLoader("cpu-plugin-a"); URLClassLoader b = pluginLoader("cpu-plugin-b")) {
            BackendFactory fa = ServiceLoader.load(BackendFactory.class, a).findFirst().orElseThrow();
            BackendFactory fb = ServiceLoader.load(BackendFactory.class, b).findFirst().orElseThrow();
            assertSame(a, fa.getClass().getClassLoader(), "factory defined by the plugin loader");
            assertNotSame(fa.getClass(), fb.getClass());
            assertNotSame(OnnxBackendFactory.class, fa.getClass());
            assertEquals("cpu", fa.name());

            try (ModelHarness ha = TestModels.harness(fa, TestModels.addSub(), TestModels.dir("add_sub")).start();
                    ModelHarness hb = TestModels.harness(fb, TestModels.addSub(), TestModels.dir("add_sub")).start()) {
                Object envA = environmentOf(a);
                for (int i = 0; i < 3; i++) { // unload and load again: same environment, library not reloaded
                    if (i > 0) {
                        ha.load();
                        hb.load();
                    }
                    run(ha, 10 + i);
                    run(hb, 20 + i);
                    ha.unload();
                    hb.unload();
                    assertSame(envA, environmentOf(a));
                }
                assertNotSame(envA, environmentOf(b), "each loader has its own copy of the runtime");
                assertNotSame(appEnvironment, envA);
            }
        }
    }
}
