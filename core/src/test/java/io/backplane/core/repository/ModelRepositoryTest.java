package io.backplane.core.repository;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.testing.TestCatalog;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ModelRepositoryTest {
    @TempDir
    Path tmp;

    private static Path tritonRepo() {
        try {
            return Path.of(Objects.requireNonNull(ModelRepositoryTest.class.getResource("/repos/triton")).toURI());
        } catch (URISyntaxException e) {
            throw new AssertionError(e);
        }
    }

    private Path model(Path root, String name, String config, long... versions) throws IOException {
        Path dir = Files.createDirectories(root.resolve(name));
        if (config != null) {
            Files.writeString(dir.resolve("config.pbtxt"), config);
        }
        for (long v : versions) {
            Files.writeString(Files.createDirectories(dir.resolve(Long.toString(v))).resolve("model.py"), "# v" + v);
        }
        return dir;
    }

    private static String python(String name, String extra) {
        return "name: \"" + name + "\"\nbackend: \"python\"\n" + extra + "\n";
    }

    private static BackplaneException thrown(ErrorCode code, org.junit.jupiter.api.function.Executable e) {
        BackplaneException x = assertThrows(BackplaneException.class, e);
        assertEquals(code, x.code(), x.getMessage());
        return x;
    }

    @Test
    void modelNames_tritonRepository_sortedDirectoryNames() {
        assertEquals(List.of("add_sub", "batched", "densenet_onnx", "no_config", "repeat_int32", "square_int32"),
                new ModelRepository(List.of(tritonRepo())).modelNames());
    }

    @Test
    void read_tritonAddSub_servesVersionOne() {
        RepositoryModel m = new ModelRepository(List.of(tritonRepo())).read("add_sub");

        assertEquals("add_sub", m.name());
        assertEquals("python", m.config().backend());
        assertEquals(List.of(1L), m.servedVersions());
        assertEquals(List.of(1L), m.availableVersions());
        assertEquals(tritonRepo().resolve("add_sub"), m.directory());
        assertEquals(tritonRepo().resolve("add_sub").resolve("1"), m.versionDirectory(1));
    }

    @Test
    void read_noConfig_infersPythonFromHighestVersion() {
        RepositoryModel m = new ModelRepository(List.of(tritonRepo()), TestCatalog.CATALOG).read("no_config");

        assertEquals("no_config", m.config().name());
        assertEquals("python", m.config().backend());
        assertEquals(List.of(3L), m.servedVersions());
        assertEquals(List.of(1L, 3L), m.availableVersions());
    }

    @Test
    void read_noConfigOnnxOrCudaFile_infersBackend() throws IOException {
        Path onnx = Files.createDirectories(tmp.resolve("o/2"));
        Files.writeString(onnx.resolve("model.onnx"), "x");
        Path cuda = Files.createDirectories(tmp.resolve("c/1"));
        Files.writeString(cuda.resolve("model.ptx"), "x");
        Files.createDirectories(tmp.resolve("none/1"));
        ModelRepository repo = new ModelRepository(List.of(tmp), TestCatalog.CATALOG);

        assertEquals("cpu", repo.read("o").config().backend());
        assertEquals("cuda", repo.read("c").config().backend());
        assertTrue(thrown(ErrorCode.INVALID_ARGUMENT, () -> repo.read("none")).getMessage().contains("model.py"));
    }

    @Test
    void read_unknownModel_notFoundListingAvailableNames() {
        BackplaneException e = thrown(ErrorCode.NOT_FOUND, () -> new ModelRepository(List.of(tritonRepo())).read("nope"));

        assertTrue(e.getMessage().contains("'nope'") && e.getMessage().contains("add_sub") && e.getMessage().contains("square_int32"),
                e.getMessage());
    }

    @Test
    void modelNames_hiddenDirectoriesAndFilesSkipped() throws IOException {
        model(tmp, "m", python("m", ""), 1);
        Files.createDirectories(tmp.resolve(".git/objects"));
        Files.writeString(tmp.resolve("README.md"), "x");

        assertEquals(List.of("m"), new ModelRepository(List.of(tmp)).modelNames());
    }

    @Test
    void read_versionPolicies_selectFromVersionFolders() throws IOException {
        model(tmp, "default", python("default", ""), 1, 2, 3);
        model(tmp, "latest2", python("latest2", "version_policy: { latest: { num_versions: 2 } }"), 1, 2, 3);
        model(tmp, "all", python("all", "version_policy: { all: {} }"), 1, 2, 3);
        model(tmp, "specific", python("specific", "version_policy: { specific: { versions: [ 1, 3 ] } }"), 1, 2, 3);
        Files.createDirectories(tmp.resolve("all/not_a_version"));
        ModelRepository repo = new ModelRepository(List.of(tmp));

        assertEquals(List.of(3L), repo.read("default").servedVersions());
        assertEquals(List.of(2L, 3L), repo.read("latest2").servedVersions());
        assertEquals(List.of(1L, 2L, 3L), repo.read("all").servedVersions());
        assertEquals(List.of(1L, 2L, 3L), repo.read("all").availableVersions());
        assertEquals(List.of(1L, 3L), repo.read("specific").servedVersions());
    }

    @Test
    void read_specificVersionMissing_errorListsExistingVersions() throws IOException {
        model(tmp, "m", python("m", "version_policy: { specific: { versions: [ 1, 4 ] } }"), 1, 2);

        BackplaneException e = thrown(ErrorCode.INVALID_ARGUMENT, () -> new ModelRepository(List.of(tmp)).read("m"));

        assertTrue(e.getMessage().contains("config.pbtxt:3:") && e.getMessage().contains("[4]") && e.getMessage().contains("[1, 2]"),
                e.getMessage());
    }

    @Test
    void read_noVersionFolder_invalidArgument() throws IOException {
        model(tmp, "m", python("m", ""));

        assertTrue(thrown(ErrorCode.INVALID_ARGUMENT, () -> new ModelRepository(List.of(tmp)).read("m")).getMessage()
                .contains("no numeric version folder"));
    }

    @Test
    void read_badConfig_invalidArgumentNamingFile() throws IOException {
        Path dir = model(tmp, "m", python("m", "max_batch_size: 4\nensemble_scheduling { }"), 1);

        String msg = thrown(ErrorCode.INVALID_ARGUMENT, () -> new ModelRepository(List.of(tmp)).read("m")).getMessage();

        assertTrue(msg.startsWith(dir.resolve("config.pbtxt") + ":4:1: field 'ensemble_scheduling': "), msg);
        assertTrue(msg.contains("an ensemble needs platform: \"ensemble\""), msg);
    }

    @Test
    void read_sameModelInTwoRoots_errorNamesBothPaths() throws IOException {
        Path a = Files.createDirectories(tmp.resolve("a"));
        Path b = Files.createDirectories(tmp.resolve("b"));
        model(a, "m", python("m", ""), 1);
        model(b, "m", python("m", ""), 1);
        model(b, "other", python("other", ""), 1);
        ModelRepository repo = new ModelRepository(List.of(a, b));

        String msg = thrown(ErrorCode.INVALID_ARGUMENT, () -> repo.read("m")).getMessage();

        assertTrue(msg.contains(a.resolve("m").toString()) && msg.contains(b.resolve("m").toString()), msg);
        assertEquals(List.of("m", "other"), repo.modelNames());
        assertEquals(List.of(1L), repo.read("other").servedVersions());
    }

    @Test
    void constructor_missingOrRepeatedRoot_invalidArgument() {
        thrown(ErrorCode.INVALID_ARGUMENT, () -> new ModelRepository(List.of(tmp.resolve("missing"))));
        thrown(ErrorCode.INVALID_ARGUMENT, () -> new ModelRepository(List.of(tmp, tmp)));
        thrown(ErrorCode.INVALID_ARGUMENT, () -> new ModelRepository(List.of()));
    }

    @Test
    void fingerprints_detectConfigEditNewVersionFileChangeAndRemoval() throws IOException {
        Path m = model(tmp, "m", python("m", ""), 1);
        model(tmp, "steady", python("steady", ""), 1);
        ModelRepository repo = new ModelRepository(List.of(tmp));
        Map<String, String> first = repo.fingerprints();
        assertEquals(first, repo.fingerprints());
        assertEquals(first.get("m"), repo.read("m").fingerprint());

        Files.writeString(m.resolve("config.pbtxt"), python("m", "max_batch_size: 2"));
        Map<String, String> edited = repo.fingerprints();
        assertEquals(new RepositoryDiff(Set.of(), Set.of(), Set.of("m")), RepositoryDiff.between(first, edited));

        Files.writeString(Files.createDirectories(m.resolve("2")).resolve("model.py"), "# v2");
        Map<String, String> newVersion = repo.fingerprints();
        assertNotEquals(edited.get("m"), newVersion.get("m"));

        Path file = m.resolve("2/model.py");
        Files.setLastModifiedTime(file, FileTime.from(Instant.parse("2020-01-01T00:00:00Z")));
        Map<String, String> touched = repo.fingerprints();
        assertNotEquals(newVersion.get("m"), touched.get("m"));
        assertEquals(first.get("steady"), touched.get("steady"));

        model(tmp, "added", python("added", ""), 1);
        Files.delete(tmp.resolve("steady/1/model.py"));
        Files.delete(tmp.resolve("steady/1"));
        Files.delete(tmp.resolve("steady/config.pbtxt"));
        Files.delete(tmp.resolve("steady"));
        RepositoryDiff diff = RepositoryDiff.between(touched, repo.fingerprints());
        assertEquals(new RepositoryDiff(Set.of("added"), Set.of("steady"), Set.of()), diff);
        assertTrue(RepositoryDiff.between(touched, touched).isEmpty());
    }

    @Test
    void fingerprints_hiddenFilesIgnored() throws IOException {
        Path m = model(tmp, "m", python("m", ""), 1);
        ModelRepository repo = new ModelRepository(List.of(tmp));
        String before = repo.fingerprints().get("m");

        Files.writeString(m.resolve(".config.pbtxt.swp"), "editor state");

        assertEquals(before, repo.fingerprints().get("m"));
    }

    /**
     * Poll mode fingerprints while another thread creates and deletes version folders and files:
     * a file vanishing mid-walk must change the fingerprint, never throw.
     */
    @Test
    void fingerprints_concurrentChurn_neverThrows() throws Exception {
        Path m = model(tmp, "m", python("m", ""), 1);
        ModelRepository repo = new ModelRepository(List.of(tmp));
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        java.util.concurrent.atomic.AtomicReference<Throwable> churnFailure = new java.util.concurrent.atomic.AtomicReference<>();
        Thread churn = new Thread(() -> {
            try {
                for (int i = 0; !stop.get(); i++) {
                    Path v = Files.createDirectories(m.resolve(Integer.toString(2 + i % 3)));
                    Files.writeString(v.resolve("model.py"), "# " + i);
                    Files.delete(v.resolve("model.py"));
                    Files.delete(v);
                }
            } catch (IOException | RuntimeException e) {
                churnFailure.set(e);
            }
        }, "fingerprint-churn");
        churn.start();
        try {
            for (int i = 0; i < 300; i++) {
                assertEquals(Set.of("m"), repo.fingerprints().keySet());
            }
        } finally {
            stop.set(true);
            churn.join();
        }
        assertEquals(null, churnFailure.get());
    }
}
