package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import io.backplane.testkit.Await;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Stubs forked from a warm template ({@link StubLauncher}, {@link StubTemplate}): the same isolation
 * as spawned stubs (own region, environment, session and process group, no template descriptor),
 * supervision of a process that is not the JVM's child, a killed template replaced, the collector
 * frozen after initialize, and nothing left behind. Everything is read from /proc and from the
 * model's own report; nothing is timed.
 */
class StubForkTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    /** Harness.FAST's 400 ms heartbeat timeout trips on a loaded machine; nothing here tests heartbeats. */
    private static final Map<String, String> PATIENT = Map.of(StubSettings.HEARTBEAT_TIMEOUT, "10000", StubSettings.STALL_KILL, "10000");

    static Map<String, String> patient(Map<String, String> more) {
        Map<String, String> m = new java.util.HashMap<>(PATIENT);
        m.putAll(more);
        return m;
    }

    @BeforeAll
    static void python() throws Exception {
        Harness.requirePython();
    }

    @AfterEach
    void clean() throws Exception {
        Harness.assertClean();
    }

    static ModelConfig processInfo(int instances) {
        return ModelConfig.builder("process_info").backend("python").maxBatchSize(0)
                .input(TensorConfig.of("INPUT0", DataType.FP32, -1)).output(TensorConfig.of("OUTPUT0", DataType.FP32, -1))
                .output(TensorConfig.of("INFO", DataType.BYTES, 1))
                .instanceGroup(InstanceGroup.of("process_info", instances, InstanceKind.CPU, List.of())).build();
    }

    static JsonNode info(Harness h, String envNames) throws Exception {
        InferenceResponse r = h.send(InferenceRequest.builder("process_info").parameter("env", envNames)
                .input(Tensor.ofFloats("INPUT0", new long[] {1}, 1f)).build()).await();
        assertFalse(r.isError(), r::toString);
        return JSON.readTree(r.output("INFO").toStringList().get(0));
    }

    /** Fields of /proc/pid/stat after the command name: [0] state, [1] ppid, [2] pgrp, [3] session. */
    static String[] stat(long pid) throws IOException {
        String s = Files.readString(Path.of("/proc/" + pid + "/stat"));
        return s.substring(s.lastIndexOf(')') + 2).split(" ");
    }

    static long ppid(long pid) throws IOException {
        return Long.parseLong(stat(pid)[1]);
    }

    static Set<String> mappedRegionFiles(long pid) throws IOException {
        Set<String> out = new HashSet<>();
        for (String line : Files.readAllLines(Path.of("/proc/" + pid + "/maps"))) {
            int i = line.indexOf("/dev/shm/" + SharedRegion.FILE_PREFIX);
            if (i >= 0) {
                out.add(line.substring(i).replace(" (deleted)", ""));
            }
        }
        return out;
    }

    static Set<String> descriptorTargets(long pid) throws IOException {
        Set<String> out = new HashSet<>();
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(Path.of("/proc/" + pid + "/fd"))) {
            for (Path fd : ds) {
                try {
                    out.add(Files.readSymbolicLink(fd).toString());
                } catch (IOException e) {
                    // closed while listing
                }
            }
        }
        return out;
    }

    static List<Long> stubPids(Harness h) {
        List<Long> pids = new ArrayList<>();
        for (PythonInstance i : h.harness.instances(PythonInstance.class)) {
            pids.add(i.currentStub().pid());
        }
        return pids;
    }

    static StubTemplate onlyTemplate(Harness h) {
        List<StubTemplate> ts = StubLauncher.templates(h.harness.backend(PythonBackend.class).socketDirectory());
        assertEquals(1, ts.size(), "one template for one interpreter and environment: " + ts);
        return ts.get(0);
    }

    static void kill(String target) throws Exception {
        Process p = new ProcessBuilder("kill", "-KILL", "--", target).inheritIO().start();
        assertTrue(p.waitFor(30, TimeUnit.SECONDS) && p.exitValue() == 0, "kill -KILL -- " + target);
    }

    @Test
    void forkedStubs_haveTheirOwnRegionSessionGroupAndEnvironment_andNoTemplateDescriptor() throws Exception {
        try (Harness h = new Harness(processInfo(3), PATIENT)) {
            assertTrue(StubLauncher.forks(h.harness.model(PythonModel.class).settings()), "forking is on by default on Linux");
            StubTemplate t = onlyTemplate(h);
            long jvm = ProcessHandle.current().pid();
            assertEquals(jvm, ppid(t.pid()), "the template is the JVM's child");
            List<Long> pids = stubPids(h);
            assertEquals(3, new HashSet<>(pids).size(), pids.toString());
            Set<String> templatePipes = new HashSet<>(descriptorTargets(t.pid()));
            templatePipes.removeIf(s -> !s.startsWith("pipe:"));
            assertFalse(templatePipes.isEmpty(), "the template's control channel is a pair of pipes");
            Set<String> seenRegionFiles = new HashSet<>();
            for (long pid : pids) {
                String[] st = stat(pid);
                assertEquals(t.pid(), Long.parseLong(st[1]), "stub " + pid + " is a fork of the template");
                assertEquals(pid, Long.parseLong(st[2]), "stub " + pid + " leads its own process group");
                assertEquals(pid, Long.parseLong(st[3]), "stub " + pid + " leads its own session");
                Set<String> files = mappedRegionFiles(pid);
                assertFalse(files.isEmpty(), "stub " + pid + " maps its region");
                for (String f : files) {
                    assertTrue(f.startsWith("/dev/shm/" + SharedRegion.FILE_PREFIX + jvm + "-"), f);
                    assertTrue(seenRegionFiles.add(f), "region file " + f + " is mapped by two stubs");
                }
                Set<String> fds = descriptorTargets(pid);
                fds.retainAll(templatePipes);
                assertEquals(Set.of(), fds, "stub " + pid + " holds descriptors of the template's");
            }
            assertEquals(Set.of(), mappedRegionFiles(t.pid()), "the template maps no region");
            JsonNode info = info(h, "PYTHONPATH,PYTHONUNBUFFERED,BACKPLANE_STUB_TOKEN");
            assertTrue(pids.contains(info.get("pid").asLong()), info.toString());
            Path stubDir = h.harness.backend(PythonBackend.class).stubDirectory();
            assertTrue(info.get("env").get("PYTHONPATH").asText().startsWith(stubDir.toString()), info.toString());
            assertEquals("1", info.get("env").get("PYTHONUNBUFFERED").asText(), info.toString());
            // The one-time token (different for every stub) reached the fork's environment: its handshake passed; the stub
            // then removed it, as a spawned stub does.
            assertTrue(info.get("env").get("BACKPLANE_STUB_TOKEN").isNull(), info.toString());
            assertEquals(Path.of(System.getProperty("user.dir")).toRealPath().toString(), info.get("cwd").asText());
            assertTrue(info.get("gc_freeze_count").asLong() > 0, "gc.freeze() ran after initialize: " + info);
            assertTrue(info.get("gc_enabled").asBoolean(), "the collector runs in a fork (the template's is off): " + info);
        }
        assertNoTemplates();
    }

    @Test
    void killingAStubsGroup_leavesTheTemplateAndSiblingsAlive_andTheReplacementIsForked() throws Exception {
        try (Harness h = new Harness(processInfo(2), PATIENT)) {
            StubTemplate t = onlyTemplate(h);
            List<Long> pids = stubPids(h);
            PythonInstance victim = h.harness.instances(PythonInstance.class).get(0);
            long dead = pids.get(0);
            long sibling = pids.get(1);
            ProcessHandle handle = ProcessHandle.of(dead).orElseThrow();
            kill("-" + dead); // the stub's whole process group
            handle.onExit().get(30, TimeUnit.SECONDS);
            Await.until(() -> victim.currentStub().pid() != dead && victim.isReady(), Duration.ofSeconds(60),
                    "the killed stub to be replaced");
            assertTrue(t.isAlive() && ProcessHandle.of(t.pid()).map(ProcessHandle::isAlive).orElse(false), "the template lives");
            assertTrue(ProcessHandle.of(sibling).map(ProcessHandle::isAlive).orElse(false), "the sibling stub lives");
            assertEquals(sibling, h.harness.instances(PythonInstance.class).get(1).currentStub().pid());
            assertEquals(t.pid(), ppid(victim.currentStub().pid()), "the replacement is a fork of the same template");
            assertEquals(2, victim.currentStub().generation());
            assertFalse(t.children().contains(dead), "the template reaped the killed stub");
            assertNotEquals("Z", stat(t.pid())[0]);
            for (int i = 0; i < 4; i++) {
                info(h, "");
            }
        }
        assertNoTemplates();
    }

    @Test
    void killedTemplate_isReplacedAtTheNextStart_andItsStubsServeOn() throws Exception {
        try (Harness h = new Harness(processInfo(1), PATIENT)) {
            StubTemplate t = onlyTemplate(h);
            long stub = stubPids(h).get(0);
            ProcessHandle template = ProcessHandle.of(t.pid()).orElseThrow();
            kill(Long.toString(t.pid()));
            template.onExit().get(30, TimeUnit.SECONDS);
            Await.until(() -> !t.isAlive(), Duration.ofSeconds(30), "the host to see the template gone");
            assertEquals(stub, info(h, "").get("pid").asLong(), "the stub forked by the dead template serves on");
            h.harness.unload();
            h.harness.load();
            h.harness.awaitReady();
            StubTemplate next = onlyTemplate(h);
            assertNotEquals(t.pid(), next.pid(), "a new template");
            long fresh = stubPids(h).get(0);
            assertNotEquals(stub, fresh);
            assertEquals(next.pid(), ppid(fresh), "the new stub is a fork of the new template");
            JsonNode info = info(h, "");
            assertEquals(fresh, info.get("pid").asLong());
        }
        assertNoTemplates();
    }

    @Test
    void forkOff_spawnsStubsAsChildrenOfTheJvm_andStillFreezesTheCollector() throws Exception {
        try (Harness h = new Harness(processInfo(1), patient(Map.of(StubSettings.FORK, "false")))) {
            assertFalse(StubLauncher.forks(h.harness.model(PythonModel.class).settings()));
            assertEquals(List.of(), StubLauncher.templates(h.harness.backend(PythonBackend.class).socketDirectory()), "no template");
            long pid = stubPids(h).get(0);
            assertEquals(ProcessHandle.current().pid(), ppid(pid), "a spawned stub is the JVM's child");
            assertEquals(pid, Long.parseLong(stat(pid)[2]), "and leads its own process group (it calls setsid)");
            JsonNode info = info(h, "");
            assertTrue(info.get("gc_freeze_count").asLong() > 0, "gc.freeze() ran after initialize: " + info);
        }
    }

    @Test
    void interpreterThatCannotRunTheTemplate_fallsBackToSpawning() throws Exception {
        // An interpreter wrapper whose template run fails: the stub is spawned, the template not tried again.
        Path dir = Files.createTempDirectory("bp-fork-test");
        Path wrapper = dir.resolve("python-no-template");
        Files.writeString(wrapper, "#!/bin/sh\ncase \"$*\" in *--template*) echo 'no template here' >&2; exit 7;; esac\nexec python3 \"$@\"\n");
        wrapper.toFile().setExecutable(true);
        try (Harness h = new Harness(processInfo(2), patient(Map.of(StubSettings.INTERPRETER, wrapper.toString())))) {
            assertEquals(List.of(), StubLauncher.templates(h.harness.backend(PythonBackend.class).socketDirectory()));
            for (long pid : stubPids(h)) {
                assertEquals(ProcessHandle.current().pid(), ppid(pid), "spawned");
            }
            assertNull(info(h, "BACKPLANE_STUB_TOKEN").get("env").get("BACKPLANE_STUB_TOKEN").textValue());
        } finally {
            Files.deleteIfExists(wrapper);
            Files.deleteIfExists(dir);
        }
    }

    @Test
    void manyThreadsForkingAtRandomTimes_whileTheTemplateIsKilled_allStubsRunAndAreReaped() throws Exception {
        Path work = Files.createTempDirectory("bp-fork-many");
        PythonBackend backend = PythonBackend.create(Map.of(), work);
        List<Long> pids = java.util.Collections.synchronizedList(new ArrayList<>());
        List<Throwable> failures = java.util.Collections.synchronizedList(new ArrayList<>());
        java.util.concurrent.atomic.AtomicInteger orphans = new java.util.concurrent.atomic.AtomicInteger();
        StubSettings settings = StubSettings.resolve(Map.of(), Map.of());
        Path model = Harness.MODELS.resolve("process_info/1/model.py");
        java.util.concurrent.CountDownLatch halfway = new java.util.concurrent.CountDownLatch(12);
        List<Thread> threads = new ArrayList<>();
        try {
            for (int t = 0; t < 8; t++) {
                int seed = t;
                threads.add(Thread.ofPlatform().start(() -> {
                    java.util.Random rnd = new java.util.Random(seed);
                    for (int k = 0; k < 3; k++) {
                        try {
                            Thread.sleep(rnd.nextInt(30));
                            Path dir = Files.createTempDirectory(work, "ac-");
                            Path request = dir.resolve("request.json");
                            Path answer = dir.resolve("answer.json");
                            Files.writeString(request, Wire.json(Map.of("model_file", model.toString(), "version_dir", model.getParent().toString(),
                                    "config", Map.of("name", "process_info"), "declared_decoupled", false)));
                            // The auto-complete run of the stub: a short-lived stub whose whole life is visible from here.
                            ProcessBuilder pb = new ProcessBuilder(settings.interpreter(), "-u", "-B",
                                    backend.stubDirectory().resolve("backplane_stub.py").toString(), "--auto-complete", request.toString(),
                                    "--out", answer.toString());
                            pb.environment().put("PYTHONPATH", backend.stubDirectory().toString());
                            pb.environment().put("BACKPLANE_STUB_TOKEN", "t" + seed + "-" + k);
                            Process p = StubLauncher.start(pb, settings, backend.socketDirectory());
                            pids.add(p.pid());
                            String printed = new String(p.getInputStream().readAllBytes()) + new String(p.getErrorStream().readAllBytes());
                            assertTrue(p.waitFor(60, TimeUnit.SECONDS), "stub " + p.pid() + " ended");
                            if (p instanceof ForkedProcess f && f.orphaned()) {
                                // its template was killed before it ended: its pidfd saw the zombie's status, unless init reaped it first
                                ExitStatus status = f.status();
                                assertTrue(ExitStatus.exited(0).equals(status) || ExitStatus.UNKNOWN.equals(status), status + " " + printed);
                                orphans.incrementAndGet();
                            } else {
                                assertEquals(0, p.exitValue(), printed);
                            }
                            assertTrue(Files.readString(answer).contains("\"config\""), Files.readString(answer));
                        } catch (Throwable e) {
                            failures.add(e);
                        } finally {
                            halfway.countDown();
                        }
                    }
                }));
            }
            halfway.await(120, TimeUnit.SECONDS);
            List<StubTemplate> ts = StubLauncher.templates(backend.socketDirectory());
            if (!ts.isEmpty()) {
                kill(Long.toString(ts.get(0).pid())); // the template dies while forks are requested
            }
            for (Thread t : threads) {
                t.join(180_000);
            }
            assertEquals(List.of(), failures.stream().map(Throwable::toString).toList());
            assertEquals(24, new HashSet<>(pids).size(), "24 distinct stubs");
            for (long pid : pids) {
                Await.until(() -> !Files.exists(Path.of("/proc/" + pid)), Duration.ofSeconds(30), "stub " + pid + " reaped (no zombie)");
            }
            for (StubTemplate t : StubLauncher.templates(backend.socketDirectory())) {
                assertEquals(List.of(), t.children(), "the template has reaped every child");
            }
        } finally {
            backend.close();
            OwnedDirectory.deleteTree(work);
        }
        assertNoTemplates();
    }

    /** No template process of this JVM is left (the backend closed them). */
    static void assertNoTemplates() {
        List<String> left = ProcessHandle.current().children().filter(ProcessHandle::isAlive)
                .map(p -> p.pid() + " " + p.info().commandLine().orElse("")).filter(s -> s.contains("--template")).toList();
        assertEquals(List.of(), left, "templates left");
    }
}
