package io.backplane.dist;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The launcher's ahead-of-time cache: {@code bin/backplane aot-cache} makes it (a training run on
 * an empty repository here, to keep the build short; docs/performance.md runs it on the samples),
 * the launcher hands it to the JVM when its stamp matches ({@code BACKPLANE_AOT=on} adds
 * {@code -XX:AOTMode=on}, under which the JVM does not start unless it maps the cache, so exit 0
 * proves it was used), and a stale one is ignored with exactly one line on stderr and none of the
 * JVM's own {@code [aot]} errors.
 */
class AotCacheTest {
    private static final Path DIST = Path.of(System.getProperty("backplane.dist", "target/backplane")).toAbsolutePath().normalize();
    private static final Path LAUNCHER = DIST.resolve("bin/backplane");

    @TempDir
    static Path dir;

    private static Path cache;

    private record Result(int code, String stdout, String stderr) {
        List<String> stderrLines() {
            return stderr.lines().filter(l -> !l.isBlank()).toList();
        }
    }

    private static Result run(Map<String, String> env, String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(LAUNCHER.toString()));
        cmd.addAll(List.of(args));
        Path out = Files.createTempFile(dir, "out", ".log");
        Path err = Files.createTempFile(dir, "err", ".log");
        ProcessBuilder pb = new ProcessBuilder(cmd).directory(dir.toFile()).redirectOutput(out.toFile()).redirectError(err.toFile());
        pb.environment().remove("JAVA_OPTS");
        pb.environment().remove("BACKPLANE_AOT");
        pb.environment().put("BACKPLANE_AOT_CACHE", cache.toString());
        pb.environment().putAll(env);
        Process p = pb.start();
        if (!p.waitFor(300, TimeUnit.SECONDS)) {
            p.destroyForcibly().waitFor();
            fail("bin/backplane " + cmd + " did not finish:\n" + Files.readString(out) + Files.readString(err));
        }
        return new Result(p.exitValue(), Files.readString(out), Files.readString(err));
    }

    @BeforeAll
    static void makeTheCache() throws Exception {
        cache = dir.resolve("cache/backplane.aot");
        Path empty = Files.createDirectories(dir.resolve("empty-repository"));
        Result r = run(Map.of(), "aot-cache", "--model-repository", empty.toString());
        assertEquals(0, r.code(), r.stdout() + r.stderr());
        assertTrue(Files.size(cache) > 0, "the cache was written");
        assertTrue(Files.readString(Path.of(cache + ".stamp")).contains("lib " + DIST.resolve("lib")), "the stamp lists the class path");
        assertTrue(r.stderr().contains("wrote " + cache), r.stderr());
    }

    @Test
    void matchingCache_isUsed() throws Exception {
        Result auto = run(Map.of(), "--version");
        assertEquals(0, auto.code(), auto.stderr());
        assertEquals(List.of(), auto.stderrLines(), "a matching cache costs no line");

        Result on = run(Map.of("BACKPLANE_AOT", "on"), "--version");
        assertEquals(0, on.code(), "with -XX:AOTMode=on the JVM starts only when it maps the cache: " + on.stderr());
        assertTrue(on.stdout().contains("backplane "), on.stdout());

        Result props = run(Map.of("BACKPLANE_AOT", "on", "JAVA_OPTS", "-Dsome.property=1 -Xlog:disable"), "--version");
        assertEquals(0, props.code(), "-D and -Xlog options do not change what the cache fits: " + props.stderr());
    }

    @Test
    void staleCache_isIgnoredWithOneLine_andOnRefusesToStart() throws Exception {
        Path stamp = Path.of(cache + ".stamp");
        String good = Files.readString(stamp);
        try {
            Files.writeString(stamp, good.replaceFirst("(?m)^jvm .*$", "jvm /opt/some-other-jdk"));
            Result jvm = run(Map.of(), "--version");
            assertEquals(0, jvm.code(), jvm.stderr());
            assertEquals(1, jvm.stderrLines().size(), "one line: " + jvm.stderr());
            assertTrue(jvm.stderr().contains("not using the AOT cache " + cache + ": it was made by another JVM"), jvm.stderr());
            assertFalse(jvm.stderr().contains("[aot]"), "the JVM was not given the cache");

            Files.writeString(stamp, good.replaceFirst("(?m)^(lib \\S+) \\d+", "$1 1"));
            Result lib = run(Map.of(), "--version");
            assertEquals(1, lib.stderrLines().size(), lib.stderr());
            assertTrue(lib.stderr().contains("lib/ changed since it was made"), lib.stderr());

            Files.writeString(stamp, good);
            Result opts = run(Map.of("JAVA_OPTS", "-XX:+UseSerialGC"), "--version");
            assertEquals(0, opts.code(), opts.stderr());
            assertEquals(1, opts.stderrLines().size(), opts.stderr());
            assertTrue(opts.stderr().contains("it was made with other -X options in JAVA_OPTS"), opts.stderr());

            Result on = run(Map.of("BACKPLANE_AOT", "on", "JAVA_OPTS", "-XX:+UseSerialGC"), "--version");
            assertEquals(1, on.code(), on.stderr());
            assertTrue(on.stderr().contains("BACKPLANE_AOT=on but the AOT cache " + cache + " does not fit"), on.stderr());

            Result off = run(Map.of("BACKPLANE_AOT", "off", "JAVA_OPTS", "-XX:+UseSerialGC"), "--version");
            assertEquals(0, off.code(), off.stderr());
            assertEquals(List.of(), off.stderrLines(), "off: no cache, no line");
        } finally {
            Files.writeString(stamp, good);
        }
    }

    @Test
    void noCache_noLine() throws IOException, Exception {
        Result r = run(Map.of("BACKPLANE_AOT_CACHE", dir.resolve("nowhere/x.aot").toString()), "--version");
        assertEquals(0, r.code(), r.stderr());
        assertEquals(List.of(), r.stderrLines());
    }
}
