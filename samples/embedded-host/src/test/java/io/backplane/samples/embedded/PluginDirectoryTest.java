package io.backplane.samples.embedded;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The textops sample backend, built by samples/custom-backend into target/plugin/textops/, is
 * found by the host in its backends directory and runs in its own class loader: the plugin sees
 * its Guava (31.1-jre) while this host sees its own (33.x), and none of its classes are on this
 * class path.
 */
class PluginDirectoryTest {
    /** samples/custom-backend/target/plugin, built in the package phase of that module (which Maven builds first). */
    static Path plugins() {
        Path dir = Path.of(System.getProperty("sample.plugins", "../custom-backend/target/plugin"));
        assertTrue(Files.isDirectory(dir.resolve("textops")), "the plugin directory " + dir.toAbsolutePath()
                + "/textops is missing: build samples/custom-backend first (./mvnw -pl samples/embedded-host -am verify does)");
        return dir;
    }

    static String hostGuavaVersion() throws Exception {
        try (InputStream in = com.google.common.base.Ascii.class.getResourceAsStream("/META-INF/maven/com.google.guava/guava/pom.properties")) {
            Properties p = new Properties();
            p.load(in);
            return p.getProperty("version");
        }
    }

    @Test
    void pluginDirectory_containsTheJarAndItsDependencies_notTheSpi() throws Exception {
        Path textops = plugins().resolve("textops");
        try (var s = Files.list(textops)) {
            assertTrue(s.anyMatch(p -> p.getFileName().toString().startsWith("backplane-sample-custom-backend-")), "the plugin jar");
        }
        try (var s = Files.list(textops.resolve("lib"))) {
            List<String> libs = s.map(p -> p.getFileName().toString()).sorted().toList();
            assertTrue(libs.contains("guava-31.1-jre.jar"), libs.toString());
            assertTrue(libs.stream().noneMatch(l -> l.startsWith("backplane-spi")), "the SPI comes from the host: " + libs);
        }
    }

    @Test
    void backendsDirectory_loadsTextops_throughItsOwnClassLoader_withItsOwnGuava() throws Exception {
        assertThrows(ClassNotFoundException.class, () -> Class.forName("com.example.textops.TextOpsBackendFactory"),
                "the plugin's classes must not be on the host's class path");
        try (BackplaneHost host = BackplaneHost.builder().backendsDirectory(plugins()).modelControlMode(ModelControlMode.EXPLICIT)
                .model(EmbeddedHostApp.shout()).loadModel("shout").build()) {
            assertTrue(host.backends().contains("textops"), host.backends().toString());
            InferenceResponse r = host.infer(InferenceRequest.builder("shout").input(Tensor.ofStrings("TEXT", new long[] {1}, "isolated")).build())
                    .get(10, TimeUnit.SECONDS);
            assertEquals(List.of("ISOLATED"), r.output("RESULT").toStringList());
            assertEquals("31.1-jre", r.parameters().get("textops.guava.version"), "the plugin sees its own Guava");
            String hostGuava = hostGuavaVersion();
            assertTrue(hostGuava.startsWith("33."), "the host sees its own Guava, not the plugin's: " + hostGuava);
        }
    }
}
