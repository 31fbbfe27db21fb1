package io.backplane.backend.python;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Starts a stub process: a fork of the warm {@link StubTemplate} of its interpreter and environment
 * where the platform allows it (Linux) and it is not switched off ({@value StubSettings#FORK}
 * {@code false}, or {@code -D}{@value #NO_FORK_PROPERTY}{@code =true}); else a plain spawn of the
 * same command. A fork skips the interpreter's start and the imports of numpy and the stub
 * (most of a stub's start-up), and gives the stub the same isolation as a spawn: its own session
 * and process group, its own shared memory (the region is made per stub, by the host, as before),
 * the command's environment and working directory, no descriptor of the template's.
 *
 * <p>Templates are kept per backend (its socket folder) and per template key: the interpreter with
 * its flags and the stub's environment less its one-time token, so a fork sees exactly the
 * environment its template imported under. A template that died is replaced at the next start; one
 * that never became ready (an interpreter without numpy, say) is not tried again for that key, and
 * its stubs are spawned, which reports the cause the usual way. A template that is alive but does
 * not answer (stopped, hung: {@link StubTemplate#isHealthy()}) is never waited for: the stub is
 * spawned at once, and the template's own supervision kills it if it stays silent, after which the
 * next start makes a new one (<b>P11</b>). {@link #closeAll} ends a backend's templates.
 */
final class StubLauncher {
    private static final Logger log = LoggerFactory.getLogger(StubLauncher.class);
    /** System property that turns forking off for the whole JVM. */
    static final String NO_FORK_PROPERTY = "backplane.python.noFork";
    /** Variables that differ from stub to stub and are not part of the template key. */
    private static final List<String> PER_STUB_VARIABLES = List.of("BACKPLANE_STUB_TOKEN");
    /** Leading elements of the stub's command that the template shares: interpreter, -u, -B, script. */
    private static final int SHARED_COMMAND = 4;

    private static final Map<Path, Map<String, Slot>> TEMPLATES = new ConcurrentHashMap<>();

    /** One template key's state; its monitor serialises the template's start. */
    private static final class Slot {
        @Nullable StubTemplate template;
        @Nullable String broken;
        boolean closed;
    }

    private StubLauncher() {
    }

    /** Whether stubs with these settings are forked from a template on this platform. */
    static boolean forks(StubSettings settings) {
        return settings.forkStubs() && !Boolean.getBoolean(NO_FORK_PROPERTY)
                && System.getProperty("os.name", "").toLowerCase(Locale.ROOT).startsWith("linux");
    }

    /**
     * Starts the stub {@code pb} describes (command: interpreter, {@code -u}, {@code -B}, the stub
     * script, its arguments; environment; working directory) for a backend whose private socket
     * folder is {@code socketDir}.
     *
     * @throws IOException as {@link ProcessBuilder#start()} does, when the interpreter cannot start
     */
    static Process start(ProcessBuilder pb, StubSettings settings, Path socketDir) throws IOException {
        List<String> command = pb.command();
        if (!forks(settings) || command.size() < SHARED_COMMAND) {
            return pb.start();
        }
        Map<String, String> env = new TreeMap<>(pb.environment());
        Map<String, String> shared = new TreeMap<>(env);
        PER_STUB_VARIABLES.forEach(shared::remove);
        Path cwd = pb.directory() != null ? pb.directory().toPath().toAbsolutePath() : Path.of(System.getProperty("user.dir"));
        List<String> templateCommand = new ArrayList<>(command.subList(0, SHARED_COMMAND));
        templateCommand.add("--template");
        String key = String.join("\u0000", templateCommand) + "\u0001" + shared;
        StubTemplate t = template(socketDir, key, templateCommand, shared, cwd, settings);
        if (t == null) {
            return pb.start();
        }
        if (!t.isHealthy()) {
            log.warn("python stub: the template (pid {}) is not answering; spawning this stub instead", t.pid());
            return pb.start();
        }
        List<String> argv = new ArrayList<>(command.subList(SHARED_COMMAND - 1, command.size()));
        try {
            return t.fork(argv, env, cwd, settings.startupTimeoutMillis());
        } catch (IOException e) {
            if (t.isAlive()) {
                log.warn("python stub: a fork of the template (pid {}) failed; spawning this stub instead: {}", t.pid(), e.getMessage());
            } else {
                log.warn("python stub: the template (pid {}) is gone; spawning this stub, the next start makes a new template: {}",
                        t.pid(), e.getMessage());
            }
            return pb.start();
        }
    }

    private static @Nullable StubTemplate template(Path socketDir, String key, List<String> command, Map<String, String> env, Path cwd,
            StubSettings settings) {
        Slot slot = TEMPLATES.computeIfAbsent(socketDir, d -> new ConcurrentHashMap<>()).computeIfAbsent(key, k -> new Slot());
        StubTemplate dead = null;
        synchronized (slot) {
            if (!java.nio.file.Files.isDirectory(socketDir)) {
                return null; // the backend has closed
            }
            if (slot.closed || slot.broken != null) {
                return null;
            }
            StubTemplate t = slot.template;
            if (t != null && t.isAlive()) {
                return t;
            }
            if (t != null) {
                log.info("python stub template (pid {}) is gone; starting a new one", t.pid());
                dead = t;
                slot.template = null;
            }
            try {
                slot.template = StubTemplate.start(command, env, cwd, socketDir, settings.startupTimeoutMillis(),
                        StubTemplate.Supervision.of(settings));
                log.info("python stubs of '{}' are forked from a warm template (pid {})", command.get(0), slot.template.pid());
            } catch (IOException e) {
                slot.broken = e.getMessage();
                log.warn("python stubs of '{}' are spawned: their template did not start ({}); set {}=false to not try", command.get(0),
                        e.getMessage(), StubSettings.FORK);
            }
        }
        if (dead != null) {
            dead.close(); // reaps what is left of it
        }
        synchronized (slot) {
            return slot.template;
        }
    }

    /** Ends the templates of the backend whose socket folder is {@code socketDir} (the stubs they forked are the instances' to end). */
    static void closeAll(Path socketDir) {
        Map<String, Slot> slots = TEMPLATES.remove(socketDir);
        if (slots == null) {
            return;
        }
        for (Slot slot : slots.values()) {
            StubTemplate t;
            synchronized (slot) {
                slot.closed = true;
                t = slot.template;
                slot.template = null;
            }
            if (t != null) {
                t.close();
            }
        }
    }

    /** The live templates of every backend of this JVM (tests). */
    static List<StubTemplate> allTemplates() {
        List<StubTemplate> out = new ArrayList<>();
        for (Path dir : TEMPLATES.keySet()) {
            out.addAll(templates(dir));
        }
        return out;
    }

    /** The live templates of a backend (tests). */
    static List<StubTemplate> templates(Path socketDir) {
        List<StubTemplate> out = new ArrayList<>();
        Map<String, Slot> slots = TEMPLATES.get(socketDir);
        if (slots != null) {
            for (Slot slot : slots.values()) {
                synchronized (slot) {
                    if (slot.template != null && slot.template.isAlive()) {
                        out.add(slot.template);
                    }
                }
            }
        }
        return out;
    }
}
