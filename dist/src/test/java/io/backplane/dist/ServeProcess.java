package io.backplane.dist;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.testkit.Await;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * The real server of the assembled layout, {@code bin/backplane serve}, as a child process of a
 * test: in a session and process group of its own, SIGINT at its default (as a terminal's shell
 * starts a foreground job), its frontends on ports the system picks on 127.0.0.1, its output in a
 * log file. For the tests that stop it the way a user does (a signal, Ctrl-C to its process group)
 * and count what it leaves behind.
 *
 * <p>{@link #close()} stops what is still running (SIGTERM, then SIGKILL to the whole process
 * group, stubs included) and prints the log when it had to: a test that failed before it stopped
 * the server would otherwise lose the log with its temporary folder.
 */
final class ServeProcess implements AutoCloseable {
    /** The assembled layout: {@code -Dbackplane.dist}, as failsafe sets it. */
    static final Path DIST = Path.of(System.getProperty("backplane.dist", "target/backplane")).toAbsolutePath().normalize();
    static final Path LAUNCHER = DIST.resolve("bin/backplane");
    private static final Pattern SERVING = Pattern.compile("frontend '([^']+)' serving at (\\S+)");
    private static final List<String> FRONTENDS = List.of("http", "grpc", "metrics", "openai");
    private static final Duration EXIT = Duration.ofSeconds(120);

    private final String name;
    private final Process process;
    private final Path log;
    private final long pid;

    private ServeProcess(String name, Process process, Path log) {
        this.name = name;
        this.process = process;
        this.log = log;
        this.pid = process.pid();
    }

    /** A server that runs in {@code dir} and logs to {@code dir/NAME.log}. */
    static Builder in(Path dir, String name) {
        return new Builder(dir, name);
    }

    static final class Builder {
        private final Path dir;
        private final String name;
        private Path repository;
        private List<String> frontends = FRONTENDS;
        private final List<String> models = new ArrayList<>();
        private final List<String> args = new ArrayList<>();
        private final Map<String, String> env = new LinkedHashMap<>();

        private Builder(Path dir, String name) {
            this.dir = dir;
            this.name = name;
        }

        /** The model repository, served in explicit model-control mode. */
        Builder repository(Path repository) {
            this.repository = repository;
            return this;
        }

        /** The frontends to start (of http, grpc and metrics; all three unless told), each on port 0 of 127.0.0.1; the others are off (port -1). */
        Builder frontends(String... names) {
            for (String f : names) {
                if (!FRONTENDS.contains(f)) {
                    throw new IllegalArgumentException("unknown frontend '" + f + "': use one of " + FRONTENDS);
                }
            }
            this.frontends = List.of(names);
            return this;
        }

        /** Models to load at start ({@code --load-model}). */
        Builder loadModels(String... names) {
            models.addAll(List.of(names));
            return this;
        }

        /** More arguments of {@code serve}. */
        Builder args(String... more) {
            args.addAll(List.of(more));
            return this;
        }

        /** An environment variable of the server (JAVA_OPTS, TMPDIR). */
        Builder env(String variable, String value) {
            env.put(variable, value);
            return this;
        }

        ServeProcess start() throws IOException {
            if (repository == null) {
                throw new IllegalStateException("no model repository: call repository(path) before start()");
            }
            // env --default-signal=INT: SIGINT at its default, as a terminal's shell starts a foreground job. A process
            // started with SIGINT ignored (a background job of a script: how CI may run the build) keeps it ignored, and
            // the JVM with it: a Ctrl-C would then do nothing (issue 32).
            List<String> cmd = new ArrayList<>(List.of("setsid", "env", "--default-signal=INT", LAUNCHER.toString(), "serve",
                    "--model-repository", repository.toString(), "--model-control-mode", "explicit"));
            for (String f : FRONTENDS) {
                if (frontends.contains(f)) {
                    cmd.addAll(List.of("--" + f + "-address", "127.0.0.1", "--" + f + "-port", "0"));
                } else {
                    cmd.addAll(List.of("--" + f + "-port", "-1"));
                }
            }
            for (String m : models) {
                cmd.addAll(List.of("--load-model", m));
            }
            cmd.addAll(args);
            Path log = dir.resolve(name + ".log");
            ProcessBuilder pb = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true).redirectOutput(log.toFile());
            pb.environment().putAll(env);
            // setsid execs env, which execs the launcher, which execs the JVM: one pid, leader of its own group
            return new ServeProcess(name, pb.start(), log);
        }
    }

    /** The server's pid, the JVM's, and the id of its process group. */
    long pid() {
        return pid;
    }

    boolean isAlive() {
        return process.isAlive();
    }

    /** What the server wrote so far (or why it could not be read). */
    String output() {
        try {
            return Files.readString(log);
        } catch (IOException e) {
            return e.toString();
        }
    }

    /** Returns once the server logged " started in "; fails with its log when it exits first or {@code limit} passes. */
    void awaitStarted(Duration limit) {
        try {
            Await.until(() -> output().contains(" started in ") || !process.isAlive(), limit, "serve to start");
        } catch (AssertionError e) {
            throw new AssertionError("serve did not start (" + e.getMessage() + "):\n" + output(), e);
        }
        assertTrue(process.isAlive(), "serve exited:\n" + output());
    }

    /** The endpoint that frontend {@code frontend} logged ("frontend 'http' serving at http://127.0.0.1:PORT"). */
    String endpoint(String frontend) {
        String out = output();
        Matcher m = SERVING.matcher(out);
        while (m.find()) {
            if (m.group(1).equals(frontend)) {
                return m.group(2);
            }
        }
        throw new AssertionError("no " + frontend + " endpoint in:\n" + out);
    }

    /** The port of {@link #endpoint}. */
    int port(String frontend) {
        String hostPort = endpoint(frontend).replaceFirst("^[a-z]+://", "").replaceAll("/.*$", "");
        return Integer.parseInt(hostPort.substring(hostPort.lastIndexOf(':') + 1));
    }

    /** The server's child processes and theirs (stubs, their template). */
    List<ProcessHandle> descendants() {
        return ProcessHandle.of(pid).map(h -> h.descendants().toList()).orElse(List.of());
    }

    /** {@code kill -SIGNAL} to the server, or to its whole process group (as a terminal's Ctrl-C). */
    void signal(String signal, boolean group) throws Exception {
        if (signal.equals("INT")) {
            assertFalse(ignores(pid, 2), "the server ignores SIGINT (SigIgn in /proc/" + pid + "/status): a Ctrl-C cannot stop it");
        }
        assertTrue(kill(signal, group), "kill -" + signal + " -- " + (group ? "-" : "") + pid);
    }

    /** The exit code, once the server exits; fails with its log when it is still running after 120 s. */
    int awaitExit() throws InterruptedException {
        assertTrue(process.waitFor(EXIT.toSeconds(), TimeUnit.SECONDS), "no exit within " + EXIT.toSeconds() + " s:\n" + output());
        return process.exitValue();
    }

    /** SIGTERM to a server still running, then checks that it exited with 0 and left no shared-memory files. */
    void terminateCleanly() throws Exception {
        if (isAlive()) {
            signal("TERM", false);
            assertEquals(0, awaitExit(), output());
            assertEquals(List.of(), shmFiles(pid()), "shared-memory files left");
        }
    }

    /** The server's files in /dev/shm ({@code backplane-PID-*}), sorted. */
    static List<String> shmFiles(long pid) {
        try (Stream<Path> f = Files.list(Path.of("/dev/shm"))) {
            return f.map(p -> p.getFileName().toString()).filter(n -> n.startsWith("backplane-" + pid + "-")).sorted().toList();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * Stops a server still running (SIGTERM, so that a test that failed early still leaves no shm
     * files or folders behind; SIGKILL if it has not exited within 60 s) and prints its log, then
     * SIGKILLs whatever is left in its process group.
     */
    @Override
    public void close() {
        try {
            if (process.isAlive()) {
                process.destroy();
                if (!process.waitFor(60, TimeUnit.SECONDS)) {
                    kill("KILL", true);
                    process.waitFor(60, TimeUnit.SECONDS);
                }
                System.out.println("[serve " + name + "] still running at the end of the test (pid " + pid + "), stopped; its log:\n" + output());
            }
            kill("KILL", true); // stubs that outlived the server; nothing to do (and kill fails) when the group is empty
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** {@code kill -SIGNAL -- [-]PID}; true when kill succeeded. */
    private boolean kill(String signal, boolean group) throws IOException, InterruptedException {
        Process k = new ProcessBuilder("kill", "-" + signal, "--", (group ? "-" : "") + pid).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        return k.waitFor(30, TimeUnit.SECONDS) && k.exitValue() == 0;
    }

    /** Whether process {@code pid} ignores signal {@code signal} (bit signal-1 of SigIgn in /proc/pid/status). */
    private static boolean ignores(long pid, int signal) throws IOException {
        for (String l : Files.readAllLines(Path.of("/proc", Long.toString(pid), "status"))) {
            if (l.startsWith("SigIgn:")) {
                return (Long.parseUnsignedLong(l.substring(7).trim(), 16) & (1L << (signal - 1))) != 0;
            }
        }
        return false;
    }
}
