package io.backplane.plugin.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.DataType;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The REST frontend driven by real {@code curl} through a shell script (src/test/resources/curl-smoke.sh). */
class HttpCurlTest {
    @Test
    void curlScript_everyEndpoint_passes() throws Exception {
        if (!curlAvailable()) {
            fail("curl is not installed, but this test needs it to drive the REST frontend from a real command-line client: "
                    + "install it (apt-get install curl) and rerun");
        }
        int port;
        Path script = Files.createTempFile("curl-smoke", ".sh");
        try (InputStream in = HttpCurlTest.class.getResourceAsStream("/curl-smoke.sh")) {
            Files.write(script, in.readAllBytes());
        }
        try (BackplaneHost host = BackplaneHost.builder().backend(new TestBackend()).modelControlMode(ModelControlMode.EXPLICIT)
                .model(TestBackend.identity("identity", DataType.FP32)).model(TestBackend.repeat("repeat"))
                .model(TestBackend.identity("spare", DataType.INT32)).loadModel("identity").loadModel("repeat").build();
                HttpFrontend frontend = (HttpFrontend) new HttpFrontendFactory().create(TestSupport.context(host,
                        Map.of("host", "127.0.0.1", "port", "0", "max_body_bytes", "65536")))) {
            frontend.start();
            port = frontend.port();
            Process p = new ProcessBuilder("bash", script.toString(), "http://127.0.0.1:" + port).redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(120, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                fail("curl script did not finish in 120 s:\n" + out);
            }
            assertEquals(0, p.exitValue(), "curl script failed:\n" + out);
        } finally {
            Files.deleteIfExists(script);
        }
        TestSupport.assertPortClosed(port);
        TestSupport.assertNoBackplaneThreads();
    }

    private static boolean curlAvailable() {
        try {
            Process p = new ProcessBuilder("curl", "--version").redirectErrorStream(true).start();
            p.getInputStream().readAllBytes();
            return p.waitFor(10, TimeUnit.SECONDS) && p.exitValue() == 0;
        } catch (IOException e) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }
}
