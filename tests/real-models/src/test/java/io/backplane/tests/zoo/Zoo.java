package io.backplane.tests.zoo;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Assumptions;

/**
 * The small model zoo, made once per build (per test JVM, and skipped by the script's stamps when a
 * previous run left it current) by {@code benchmarks/zoo/make_zoo.py --size small} in the model
 * environment. Where that environment is missing the tests skip, naming {@code tools/model-env.sh}.
 *
 * <p>The environment: {@code $BACKPLANE_MODEL_ENV}, else {@code ~/.cache/backplane/model-env}
 * (where {@code tools/model-env.sh} puts it).
 */
final class Zoo {
    static final String BERT = "bert_small";
    static final String RESNET = "resnet_small";
    static final String BERT_TORCH = "bert_torch_small";
    static final int HIDDEN = 64;
    static final int VOCABULARY = 1000;
    static final int IMAGE = 64;
    static final int CLASSES = 10;

    private static @Nullable Path repository;
    private static @Nullable String missing;
    private static @Nullable Path conformance;

    private Zoo() {
    }

    /** The project's root (the folder holding benchmarks/zoo/make_zoo.py). */
    static Path root() {
        Path p = Path.of("").toAbsolutePath();
        while (p != null && !Files.isRegularFile(p.resolve("benchmarks/zoo/make_zoo.py"))) {
            p = p.getParent();
        }
        if (p == null) {
            throw new IllegalStateException("benchmarks/zoo/make_zoo.py not found above " + Path.of("").toAbsolutePath());
        }
        return p;
    }

    static Path environment() {
        String env = System.getenv("BACKPLANE_MODEL_ENV");
        return env != null && !env.isBlank() ? Path.of(env) : Path.of(System.getProperty("user.home"), ".cache/backplane/model-env");
    }

    /** The model environment's python, or a skip naming tools/model-env.sh. */
    static Path python() {
        Path py = environment().resolve("bin/python");
        Assumptions.assumeTrue(Files.isExecutable(py), "no model environment at " + environment()
                + " (torch, transformers, onnx, onnxruntime); run tools/model-env.sh to make it");
        return py;
    }

    /**
     * The small zoo's repository (resnet_small, bert_small, bert_torch_small), made on first use;
     * skips the calling test, naming tools/model-env.sh, where the environment cannot make it.
     */
    static synchronized Path repository() {
        if (missing != null) {
            Assumptions.abort(missing);
        }
        if (repository != null) {
            return repository;
        }
        Path py = python();
        Path out = Path.of("target/zoo-small").toAbsolutePath();
        try {
            Run r = run(List.of(py.toString(), root().resolve("benchmarks/zoo/make_zoo.py").toString(), "--out", out.toString(), "--size",
                    "small"), 600);
            if (r.exit != 0) {
                if (r.output.contains("torch is missing") || r.output.contains("No module named")) {
                    missing = "the model environment " + environment() + " cannot make the zoo (" + lastLine(r.output)
                            + "); run tools/model-env.sh";
                    Assumptions.abort(missing);
                }
                throw new IllegalStateException("make_zoo.py failed (exit " + r.exit + "):\n" + r.output);
            }
        } catch (IOException e) {
            throw new IllegalStateException("could not run " + py, e);
        }
        repository = out;
        return out;
    }

    /**
     * The zoo's repository for the conformance kit: its models without their {@code model_warmup}
     * (the kit's gated batcher holds every execution until the check releases it, the host's warm-up
     * too, which must end before the model reports ready). Files are links to the zoo's.
     */
    static synchronized Path conformanceRepository() throws IOException {
        if (conformance == null) {
            Path dir = Files.createTempDirectory(Files.createDirectories(Path.of("target").toAbsolutePath()), "zoo-conformance");
            conformance = copy(dir, Zoo::withoutWarmup, BERT, BERT_TORCH);
        }
        return conformance;
    }

    /** The config without its model_warmup block (the zoo writes it last). */
    static String withoutWarmup(String config) {
        int at = config.indexOf("model_warmup");
        return at < 0 ? config : config.substring(0, at);
    }

    /**
     * A copy of some zoo models in a fresh repository {@code dir}, each config passed through {@code edit}. The model files are
     * links to the zoo's, outside the repository: a host serving it needs {@code allowLinksOutsideRepository(true)}.
     */
    static Path copy(Path dir, java.util.function.UnaryOperator<String> edit, String... models) throws IOException {
        Path zoo = repository();
        Path repo = Files.createDirectories(dir.resolve("repo"));
        for (String m : models) {
            Path from = zoo.resolve(m);
            try (var files = Files.walk(from)) {
                for (Path f : files.toList()) {
                    Path to = repo.resolve(m).resolve(from.relativize(f).toString());
                    if (Files.isDirectory(f)) {
                        Files.createDirectories(to);
                    } else if (f.getFileName().toString().equals("config.pbtxt")) {
                        Files.writeString(to, edit.apply(Files.readString(f)));
                    } else if (!f.getFileName().toString().startsWith(".")) {
                        Files.createSymbolicLink(to, f);
                    }
                }
            }
        }
        return repo;
    }

    record Run(int exit, String output) {
    }

    static Run run(List<String> command, long timeoutSeconds) throws IOException {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        try {
            p.getOutputStream().close();
            byte[] out = p.getInputStream().readAllBytes();
            if (!p.waitFor(timeoutSeconds, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new IllegalStateException(command + " ran past " + timeoutSeconds + " s");
            }
            return new Run(p.exitValue(), new String(out, StandardCharsets.UTF_8));
        } catch (InterruptedException e) {
            p.destroyForcibly();
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted running " + command, e);
        }
    }

    private static String lastLine(String s) {
        List<String> lines = new ArrayList<>(s.lines().filter(l -> !l.isBlank()).toList());
        return lines.isEmpty() ? "no output" : lines.getLast();
    }
}
