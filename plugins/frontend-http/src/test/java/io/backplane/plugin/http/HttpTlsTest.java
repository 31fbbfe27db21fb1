package io.backplane.plugin.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.util.Map;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The REST frontend over TLS with a certificate and key from PEM files. */
class HttpTlsTest {
    @TempDir
    Path dir;

    @Test
    void tls_certificateFromFiles_servesHttpsAndRefusesPlainHttp() throws Exception {
        TestCertificates.Pem pem = TestCertificates.create(dir, "server");
        try (BackplaneHost host = BackplaneHost.builder().backend(new TestBackend()).modelControlMode(ModelControlMode.EXPLICIT).build()) {
            HttpFrontend frontend = (HttpFrontend) new HttpFrontendFactory().create(TestSupport.context(host, Map.of("host", "127.0.0.1", "port", "0",
                    "ssl_cert", pem.cert().toString(), "ssl_key", pem.key().toString())));
            frontend.start();
            try {
                assertTrue(frontend.endpoint().startsWith("https://"), frontend.endpoint());
                try (HttpClient client = HttpClient.newBuilder().sslContext(trusting(pem.cert())).build()) {
                    HttpResponse<String> r = client.send(HttpRequest.newBuilder(URI.create("https://localhost:" + frontend.port() + "/v2/health/live"))
                            .timeout(Duration.ofSeconds(30)).build(), HttpResponse.BodyHandlers.ofString());
                    assertEquals(200, r.statusCode());
                }
                try (HttpClient plain = HttpClient.newHttpClient()) {
                    assertThrows(IOException.class, () -> plain.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + frontend.port() + "/v2/health/live"))
                            .timeout(Duration.ofSeconds(30)).build(), HttpResponse.BodyHandlers.ofString()));
                }
            } finally {
                frontend.close();
            }
        }
        TestSupport.assertNoBackplaneThreads();
    }

    @Test
    void tls_certWithoutKey_rejectedNamingBothOptions() throws Exception {
        TestCertificates.Pem pem = TestCertificates.create(dir, "lonely");
        var e = assertThrows(RuntimeException.class, () -> FrontendOptions.parse(Map.of("ssl_cert", pem.cert().toString())));
        assertTrue(e.getMessage().contains("ssl_cert") && e.getMessage().contains("ssl_key"), e.getMessage());
    }

    static SSLContext trusting(Path cert) throws Exception {
        KeyStore trust = KeyStore.getInstance(KeyStore.getDefaultType());
        trust.load(null, null);
        try (InputStream in = Files.newInputStream(cert)) {
            trust.setCertificateEntry("server", CertificateFactory.getInstance("X.509").generateCertificate(in));
        }
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(trust);
        SSLContext ctx = SSLContext.getInstance("TLS");
        ctx.init(null, tmf.getTrustManagers(), null);
        return ctx;
    }
}
