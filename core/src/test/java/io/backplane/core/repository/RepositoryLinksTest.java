package io.backplane.core.repository;

import static io.backplane.core.testing.ScriptedBackend.request;
import static io.backplane.core.testing.ScriptedBackend.tagOf;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.internal.ModelRegistry;
import io.backplane.core.testing.Hygiene;
import io.backplane.core.testing.ScriptedBackend;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.host.LoadOverride;
import io.backplane.spi.host.ModelStatus;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.slf4j.LoggerFactory;

/**
 * Symbolic links in the model repository, through the real embedded host: a model file or folder
 * whose real path leaves the repository root is refused by default (INVALID_ARGUMENT naming the
 * link, where it points and what to do), links that stay inside the root (a Kubernetes ConfigMap
 * mount's {@code ..data} layout, a root that is itself a link) load, and
 * {@code allowLinksOutsideRepository(true)} serves the outside ones. Real files in a temporary
 * folder: {@code repo/} is the repository, {@code outside/} is elsewhere.
 */
@Timeout(60)
class RepositoryLinksTest {
    @TempDir
    Path temp;

    private Path repo;
    private Path outside;
    private final ScriptedBackend backend = new ScriptedBackend();
    private @Nullable BackplaneHost host;

    @BeforeEach
    void folders() throws IOException {
        repo = Files.createDirectories(temp.resolve("repo"));
        outside = Files.createDirectories(temp.resolve("outside"));
    }

    @AfterEach
    void closeAndCheckHygiene() {
        if (host != null) {
            host.close();
            assertEquals(0, host.openRequests(), "open requests after close");
            assertEquals(backend.instancesCreated.get(), backend.instancesClosed.get(), "every instance closed");
            assertEquals(backend.modelsLoaded.get(), backend.modelsClosed.get(), "every model closed");
        }
        Hygiene.assertNoBackplaneThreads();
    }

    private static String config(String name, String extra) {
        return """
                name: "%s"
                backend: "scripted"
                input [ { name: "IN" data_type: TYPE_INT64 dims: [ 1 ] } ]
                output [ { name: "OUT" data_type: TYPE_INT64 dims: [ 1 ] } ]
                %s
                """.formatted(name, extra);
    }

    /** A complete model {@code name} (config, version 1 with a weights file) in folder {@code dir}. */
    private static Path model(Path dir, String name, String extra) throws IOException {
        Files.createDirectories(dir);
        Files.writeString(dir.resolve("config.pbtxt"), config(name, extra));
        Files.writeString(Files.createDirectories(dir.resolve("1")).resolve("weights"), "v1");
        return dir;
    }

    private BackplaneHost explicitHost(Path root, boolean allowLinksOut) {
        host = BackplaneHost.builder().backend(backend).modelRepository(root).modelControlMode(ModelControlMode.EXPLICIT)
                .allowLinksOutsideRepository(allowLinksOut).build();
        return host;
    }

    /** The four ways a model reaches outside: a file, its config, its version folder, the model folder itself. */
    private Map<String, Path> outsideLinks() throws IOException {
        Path fileOut = model(repo.resolve("file_out"), "file_out", "");
        Files.delete(fileOut.resolve("1/weights"));
        Files.writeString(outside.resolve("weights"), "secret");
        Files.createSymbolicLink(fileOut.resolve("1/weights"), outside.resolve("weights"));

        Path configOut = model(repo.resolve("config_out"), "config_out", "");
        Files.move(configOut.resolve("config.pbtxt"), outside.resolve("config.pbtxt"));
        Files.createSymbolicLink(configOut.resolve("config.pbtxt"), outside.resolve("config.pbtxt"));

        Path versionOut = model(repo.resolve("version_out"), "version_out", "");
        Files.move(versionOut.resolve("1"), outside.resolve("v1"));
        Files.createSymbolicLink(versionOut.resolve("1"), outside.resolve("v1"));

        model(outside.resolve("folder_out"), "folder_out", "");
        Files.createSymbolicLink(repo.resolve("folder_out"), outside.resolve("folder_out"));
        return Map.of("file_out", fileOut.resolve("1/weights"), "config_out", configOut.resolve("config.pbtxt"), "version_out",
                versionOut.resolve("1"), "folder_out", repo.resolve("folder_out"));
    }

    private static void assertRefusedNamingTheLink(BackplaneException e, Path link) throws IOException {
        String m = e.getMessage();
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code(), m);
        assertTrue(m.contains(link + " is a symbolic link to " + Files.readSymbolicLink(link)), m);
        assertTrue(m.contains("(really " + link.toRealPath() + ")"), m);
        assertTrue(m.contains("outside the model repository"), m);
        assertTrue(m.contains("copy it into the model repository, or start the server with --allow-links-outside-repository"), m);
    }

    @Test
    void linkOutside_ofAFileTheConfigTheVersionFolderOrTheModelFolder_isRefusedNamingTheLink_andReachesNoBackend() throws Exception {
        Map<String, Path> links = outsideLinks();
        model(repo.resolve("inside"), "inside", "");
        BackplaneHost h = explicitHost(repo, false);

        for (Map.Entry<String, Path> l : links.entrySet()) {
            BackplaneException e = assertThrows(BackplaneException.class, () -> h.load(l.getKey()), l.getKey());
            assertTrue(e.getMessage().startsWith("failed to load '" + l.getKey() + "', model '" + l.getKey() + "'"), e.getMessage());
            assertRefusedNamingTheLink(e, l.getValue());
            assertFalse(h.isModelReady(l.getKey()));
        }
        assertEquals(0, backend.modelsLoaded.get(), "refused before any backend saw the model");

        h.load("inside");
        assertEquals(7, tagOf(h.infer(request("inside", 7)).get(10, TimeUnit.SECONDS)), "the other models serve");
    }

    @Test
    void allowLinksOutsideRepository_servesTheModelsThatLinkOut() throws Exception {
        Map<String, Path> links = outsideLinks();
        BackplaneHost h = explicitHost(repo, true);

        for (String name : links.keySet()) {
            h.load(name);
            assertEquals(3, tagOf(h.infer(request(name, 3)).get(10, TimeUnit.SECONDS)), name);
        }
    }

    /**
     * A ConfigMap-like mount (Kubernetes: the files are links into {@code ..data}, itself a link to
     * a timestamped folder), a version folder and a label file linked to a hidden folder elsewhere
     * in the repository, and a repository root that is itself a link: all inside, all served.
     */
    @Test
    void linksInsideTheRepository_configMapLayout_andARootThatIsALink_load() throws Exception {
        Path cm = Files.createDirectories(repo.resolve("cm"));
        Path stamped = Files.createDirectories(cm.resolve("..2026_12_04_10_00_00.123456789"));
        Files.writeString(stamped.resolve("config.pbtxt"), """
                name: "cm"
                backend: "scripted"
                input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2 ] } ]
                output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] label_filename: "labels.txt" } ]
                """);
        Files.createSymbolicLink(cm.resolve("..data"), Path.of(stamped.getFileName().toString()));
        Files.createSymbolicLink(cm.resolve("config.pbtxt"), Path.of("..data/config.pbtxt"));
        Path shared = Files.createDirectories(repo.resolve(".shared"));
        Files.writeString(Files.createDirectories(shared.resolve("cm-1")).resolve("weights"), "v1");
        Files.writeString(shared.resolve("labels.txt"), "cat\ndog\n");
        Files.createSymbolicLink(cm.resolve("1"), Path.of("../.shared/cm-1"));
        Files.createSymbolicLink(cm.resolve("labels.txt"), Path.of("../.shared/labels.txt")); // outside the model folder, inside the root
        Path rootLink = Files.createSymbolicLink(temp.resolve("repo-link"), repo);
        BackplaneHost h = explicitHost(rootLink, false);

        h.load("cm");

        InferenceResponse r = h.infer(InferenceRequest.builder("cm").input(Tensor.ofFloats("IN", new long[] {2}, 0.2f, 0.8f))
                .requestClassification("OUT", 1).build()).get(10, TimeUnit.SECONDS);
        assertEquals(List.of("0.800000:1:dog"), r.output("OUT").toStringList(), "the labels were read through the links");
    }

    @Test
    void linkLoop_isAnErrorNamingTheLoop_notAHang() throws Exception {
        Path back = model(repo.resolve("back"), "back", "");
        Files.createSymbolicLink(back.resolve("1/up"), Path.of(".."));
        Path self = model(repo.resolve("self"), "self", "");
        Files.createSymbolicLink(self.resolve("1/me"), Path.of("me"));
        BackplaneHost h = explicitHost(repo, false);

        BackplaneException e = assertThrows(BackplaneException.class, () -> h.load("back"));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains(back.resolve("1/up") + " is a link to .., which leads back to " + back.toRealPath()
                + ", a folder that holds the link: a link loop"), e.getMessage());
        BackplaneException s = assertThrows(BackplaneException.class, () -> h.load("self"));
        assertEquals(ErrorCode.INVALID_ARGUMENT, s.code());
        assertTrue(s.getMessage().contains(self.resolve("1/me") + " cannot be resolved, a link loop"), s.getMessage());
    }

    /**
     * Files a config names that the folder check does not see (in a hidden folder, which it does not
     * walk into): the label file and the warm-up data are checked when they are opened, by the same
     * rule and option. A hidden link the folder check does see is refused by it.
     */
    @Test
    void labelAndWarmupFilesNamedByTheConfig_linkingOut_areRefused_unlessAllowed() throws Exception {
        Path labels = model(repo.resolve("labels"), "labels", "");
        Files.writeString(labels.resolve("config.pbtxt"), """
                name: "labels"
                backend: "scripted"
                input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2 ] } ]
                output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] label_filename: ".cfg/labels.txt" } ]
                """);
        Files.writeString(outside.resolve("labels.txt"), "root:x:0:0\n");
        Files.createSymbolicLink(Files.createDirectories(labels.resolve(".cfg")).resolve("labels.txt"), outside.resolve("labels.txt"));
        Path warm = model(repo.resolve("warm"), "warm", "");
        Files.writeString(warm.resolve("config.pbtxt"), config("warm", """
                model_warmup [ { name: "w" batch_size: 1 inputs { key: "IN" value: { data_type: TYPE_INT64 dims: [ 1 ] input_data_file: ".d/in.bin" } } } ]
                """));
        Files.write(outside.resolve("in.bin"), new byte[8]);
        Files.createSymbolicLink(Files.createDirectories(warm.resolve("warmup/.d")).resolve("in.bin"), outside.resolve("in.bin"));
        Path hidden = model(repo.resolve("hidden"), "hidden", "");
        Files.createSymbolicLink(hidden.resolve("1/.weights.bin"), outside.resolve("in.bin"));
        BackplaneHost h = explicitHost(repo, false);

        BackplaneException l = assertThrows(BackplaneException.class, () -> h.load("labels"));
        assertTrue(l.getMessage().contains("model 'labels' output 'OUT' label_filename '.cfg/labels.txt':"), l.getMessage());
        assertRefusedNamingTheLink(l, labels.resolve(".cfg/labels.txt"));
        BackplaneException w = assertThrows(BackplaneException.class, () -> h.load("warm"));
        assertTrue(w.getMessage().contains("warm-up sample 'w' input 'IN' input_data_file '.d/in.bin':"), w.getMessage());
        assertRefusedNamingTheLink(w, warm.resolve("warmup/.d/in.bin"));
        BackplaneException d = assertThrows(BackplaneException.class, () -> h.load("hidden"));
        assertRefusedNamingTheLink(d, hidden.resolve("1/.weights.bin")); // a hidden link: checked by the folder walk
        h.close();

        BackplaneHost allowed = explicitHost(repo, true);
        allowed.load("labels");
        allowed.load("warm");
        allowed.load("hidden");
        assertTrue(allowed.isModelReady("labels") && allowed.isModelReady("warm") && allowed.isModelReady("hidden"));
    }

    /** A file a backend opens by name goes through {@code ModelContext.checkedFile}: the same rule, the same option. */
    @Test
    void checkedFile_aPathTheBackendOpens_outsideIsRefused_insideAndCodeModelsPass_optionAllows() throws Exception {
        Files.writeString(outside.resolve("vocab.txt"), "secret");
        model(repo.resolve("abs_out"), "abs_out", "parameters { key: \"file\" value { string_value: \"" + outside.resolve("vocab.txt") + "\" } }");
        model(repo.resolve("abs_in"), "abs_in", "parameters { key: \"file\" value { string_value: \"" + repo.resolve("abs_in/1/weights") + "\" } }");
        backend.onLoad = ctx -> {
            String file = ctx.config().parameters().get("file");
            if (file != null) {
                Path p = Path.of(file);
                assertEquals(p, ctx.checkedFile(p, "parameter file"), "returned unchanged");
            }
        };
        ModelConfig inCode = ScriptedBackend.model("code", false).toBuilder().parameter("file", outside.resolve("vocab.txt").toString()).build();
        host = BackplaneHost.builder().backend(backend).modelRepository(repo).model(inCode).modelControlMode(ModelControlMode.EXPLICIT).build();
        BackplaneHost h = host;

        BackplaneException e = assertThrows(BackplaneException.class, () -> h.load("abs_out"));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("model 'abs_out' version 1: parameter file " + outside.resolve("vocab.txt") + " is outside the model"
                + " repository " + repo + "; copy it into the model repository, or start the server with --allow-links-outside-repository"),
                e.getMessage());
        h.load("abs_in");
        h.load("code");
        assertTrue(h.isModelReady("abs_in") && h.isModelReady("code"), "inside the repository, and a model defined in code (no root)");
        h.close();

        explicitHost(repo, true).load("abs_out");
    }

    /** A model loaded with files has its private folder as its root: a path outside it is refused, one in it passes. */
    @Test
    void checkedFile_modelLoadedWithFiles_itsPrivateFolderIsItsRoot() throws Exception {
        Files.writeString(outside.resolve("vocab.txt"), "secret");
        backend.onLoad = ctx -> {
            ctx.checkedFile(ctx.versionDirectory().resolve("weights"), "the weights");
            String file = ctx.config().parameters().get("file");
            if (file != null) {
                ctx.checkedFile(Path.of(file), "parameter file");
            }
        };
        BackplaneHost h = explicitHost(repo, false);
        String json = """
                {"name": "posted", "backend": "scripted", "input": [{"name": "IN", "data_type": "TYPE_INT64", "dims": [1]}],
                 "output": [{"name": "OUT", "data_type": "TYPE_INT64", "dims": [1]}]%s}
                """;
        Map<String, byte[]> files = Map.of("1/weights", "v1".getBytes(StandardCharsets.UTF_8));

        h.load("posted", new LoadOverride(json.formatted(""), files));
        assertEquals(4, tagOf(h.infer(request("posted", 4)).get(10, TimeUnit.SECONDS)));
        BackplaneException e = assertThrows(BackplaneException.class, () -> h.load("posted", new LoadOverride(json.formatted(
                ", \"parameters\": {\"file\": {\"string_value\": \"" + outside.resolve("vocab.txt") + "\"}}"), files)));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("parameter file " + outside.resolve("vocab.txt") + " is outside the model repository"), e.getMessage());
        assertEquals(4, tagOf(h.infer(request("posted", 4)).get(10, TimeUnit.SECONDS)), "the failed reload kept the version serving");
    }

    /**
     * Poll mode: a model whose folder is replaced by a link out fails its reload with the error
     * (its version keeps serving, L9), a model added as a link out fails its load with the error in
     * the index, the others serve. The handshake: models are polled in name order from one scan,
     * so once {@code z_marker} (moved in after the links) is ready, the poll has tried the others.
     */
    @Test
    void pollMode_aModelReplacedByALinkOut_failsItsReloadWithTheError_othersServe() throws Exception {
        model(repo.resolve("a_swapped"), "a_swapped", "");
        model(repo.resolve("ok"), "ok", "");
        model(outside.resolve("a_swapped"), "a_swapped", "parameters { key: \"k\" value { string_value: \"outside\" } }");
        model(outside.resolve("b_new"), "b_new", "");
        Path staged = model(temp.resolve("staged/z_marker"), "z_marker", "");
        Logger registryLog = (Logger) LoggerFactory.getLogger(ModelRegistry.class);
        ListAppender<ILoggingEvent> logged = new ListAppender<>();
        logged.start();
        registryLog.addAppender(logged);
        try {
            host = BackplaneHost.builder().backend(backend).modelRepository(repo).modelControlMode(ModelControlMode.POLL)
                    .pollInterval(Duration.ofMillis(50)).build();
            BackplaneHost h = host;
            assertTrue(h.isModelReady("a_swapped") && h.isModelReady("ok"));

            deleteTree(repo.resolve("a_swapped"));
            Files.createSymbolicLink(repo.resolve("a_swapped"), outside.resolve("a_swapped"));
            Files.createSymbolicLink(repo.resolve("b_new"), outside.resolve("b_new"));
            Files.move(staged, repo.resolve("z_marker"), StandardCopyOption.ATOMIC_MOVE);
            await(() -> h.isModelReady("z_marker"), "the poll after the links loaded z_marker");

            String failed = logged.list.stream().map(ILoggingEvent::getFormattedMessage)
                    .filter(m -> m.startsWith("repository poll: model 'a_swapped' failed to load")).findFirst().orElseThrow(() ->
                            new AssertionError("no failed reload of a_swapped logged: " + logged.list));
            assertTrue(failed.contains(repo.resolve("a_swapped") + " is a symbolic link to " + outside.resolve("a_swapped")), failed);
            assertTrue(failed.contains("--allow-links-outside-repository"), failed);
            assertTrue(h.isModelReady("a_swapped"), "the failed reload kept the version loaded from inside");
            assertFalse(h.modelConfig("a_swapped", 1).parameters().containsKey("k"), "still the inside config");

            ModelStatus b = h.repositoryIndex().stream().filter(s -> s.name().equals("b_new")).findFirst().orElseThrow();
            assertFalse(h.isModelReady("b_new"));
            assertTrue(b.reason().contains(repo.resolve("b_new") + " is a symbolic link to " + outside.resolve("b_new")), b.reason());

            assertEquals(5, tagOf(h.infer(request("ok", 5)).get(10, TimeUnit.SECONDS)));
            assertEquals(6, tagOf(h.infer(request("a_swapped", 6)).get(10, TimeUnit.SECONDS)));
            assertEquals(3, backend.modelsLoaded.get(), "a_swapped, ok, z_marker: no backend saw the outside folders");
        } finally {
            registryLog.detachAppender(logged);
        }
    }

    /**
     * The poll-mode fingerprint stops at a link out (it records where the link points): it does not
     * walk a tree outside the repository, so a change out there is not a change, and retargeting
     * the link is. With links out allowed it follows them, as before.
     */
    @Test
    void fingerprint_stopsAtALinkOut_recordsItsTarget() throws Exception {
        model(outside.resolve("m"), "m", "");
        model(outside.resolve("m2"), "m", "");
        Path link = Files.createSymbolicLink(repo.resolve("m"), outside.resolve("m"));
        ModelRepository refusing = new ModelRepository(List.of(repo));
        ModelRepository allowing = new ModelRepository(List.of(repo), io.backplane.core.config.BackendCatalog.NONE, true);
        String before = refusing.fingerprints().get("m");
        String beforeAllowed = allowing.fingerprints().get("m");

        Files.writeString(outside.resolve("m/1/more"), "x");
        assertEquals(before, refusing.fingerprints().get("m"), "nothing outside is walked");
        assertNotEquals(beforeAllowed, allowing.fingerprints().get("m"), "allowed: the link is followed");

        Files.delete(link);
        Files.createSymbolicLink(repo.resolve("m"), outside.resolve("m2"));
        assertNotEquals(before, refusing.fingerprints().get("m"), "retargeting the link is a change");
        assertThrows(BackplaneException.class, () -> refusing.read("m"));
        assertEquals("m", allowing.read("m").name());
    }

    private static void deleteTree(Path dir) throws IOException {
        try (var s = Files.walk(dir)) {
            for (Path p : s.sorted(java.util.Comparator.reverseOrder()).toList()) {
                Files.delete(p);
            }
        }
    }

    private static void await(BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting until " + what);
            }
            Thread.sleep(20);
        }
    }
}
