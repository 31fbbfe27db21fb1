package io.backplane.plugin.http;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.Key;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Self-signed certificates made at test time with the JDK's {@code keytool}, exported as the PEM
 * files the frontends read: {@code <name>.crt} (certificate) and {@code <name>.key} (PKCS#8 key).
 * Valid for {@code localhost} and {@code 127.0.0.1}.
 */
public final class TestCertificates {
    /** The files of one certificate. */
    public record Pem(Path cert, Path key) {
    }

    private TestCertificates() {
    }

    public static Pem create(Path dir, String name) throws IOException, InterruptedException, GeneralSecurityException {
        Path store = dir.resolve(name + ".p12");
        char[] password = "changeit".toCharArray();
        Path keytool = Path.of(System.getProperty("java.home"), "bin", "keytool");
        Process p = new ProcessBuilder(List.of(keytool.toString(), "-genkeypair", "-alias", name, "-keyalg", "RSA", "-keysize", "2048",
                "-validity", "2", "-dname", "CN=" + name, "-ext", "SAN=dns:localhost,ip:127.0.0.1", "-storetype", "PKCS12",
                "-keystore", store.toString(), "-storepass", new String(password), "-keypass", new String(password)))
                .redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
            p.destroyForcibly();
            throw new IOException("keytool failed: " + out);
        }
        KeyStore ks = KeyStore.getInstance("PKCS12");
        try (InputStream in = Files.newInputStream(store)) {
            ks.load(in, password);
        }
        Certificate cert = ks.getCertificate(name);
        Key key = ks.getKey(name, password);
        Path certFile = Files.writeString(dir.resolve(name + ".crt"), pem("CERTIFICATE", cert.getEncoded()));
        Path keyFile = Files.writeString(dir.resolve(name + ".key"), pem("PRIVATE KEY", key.getEncoded()));
        Files.delete(store);
        return new Pem(certFile, keyFile);
    }

    private static String pem(String type, byte[] der) {
        return "-----BEGIN " + type + "-----\n" + Base64.getMimeEncoder(64, "\n".getBytes(StandardCharsets.US_ASCII)).encodeToString(der)
                + "\n-----END " + type + "-----\n";
    }
}
