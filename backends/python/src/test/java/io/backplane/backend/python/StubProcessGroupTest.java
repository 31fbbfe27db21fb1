package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * What a model starts ends with its stub (R3, {@link ProcessGroup}): the {@code process_group} model
 * starts a {@code subprocess.Popen} sleeper and an {@code os.fork()}ed sleeping child in
 * {@code initialize()}; whether the stub is unloaded (finalize, then exit), killed by the host, or
 * killed from outside (SIGKILL, then restarted), both children end, with stubs forked from the warm
 * template and with spawned ones. Every end is awaited on the process's exit, up to a deadline.
 */
class StubProcessGroupTest {
    /** Nothing here tests heartbeats: a loaded machine must not trip them. */
    private static final Map<String, String> PATIENT = Map.of(StubSettings.HEARTBEAT_TIMEOUT, "10000", StubSettings.STALL_KILL, "10000");

    private final List<ProcessHandle> started = new ArrayList<>();

    @BeforeAll
    static void python() throws Exception {
        Harness.requirePython();
    }

    @AfterEach
    void clean() throws Exception {
        try {
            for (ProcessHandle h : started) {
                h.destroyForcibly(); // only what a failed assertion left behind
            }
            for (ProcessHandle h : started) {
                ProcessGroupTest.awaitEnded(h);
            }
        } finally {
            Harness.assertClean();
        }
    }

    static ModelConfig processGroup() {
        return ModelConfig.builder("process_group").backend("python").maxBatchSize(0)
                .input(TensorConfig.of("INPUT0", DataType.FP32, -1)).output(TensorConfig.of("PIDS", DataType.INT64, 3)).build();
    }

    private static Harness harness(boolean fork) {
        Map<String, String> options = new java.util.HashMap<>(PATIENT);
        options.put(StubSettings.FORK, Boolean.toString(fork));
        Harness h = new Harness(processGroup(), options);
        assertEquals(fork, StubLauncher.forks(h.harness.model(PythonModel.class).settings()), "fork_stubs " + fork);
        return h;
    }

    /** The stub's pid, then its children's handles (checked to be in the stub's process group). */
    private List<ProcessHandle> children(Harness h) throws Exception {
        InferenceResponse r = h.send(InferenceRequest.builder("process_group").input(Tensor.ofFloats("INPUT0", new long[] {1}, 1f)).build()).await();
        assertFalse(r.isError(), r::toString);
        long[] pids = r.output("PIDS").toLongArray();
        assertEquals(h.stub().pid(), pids[0], "the model runs in the current stub");
        List<ProcessHandle> out = new ArrayList<>();
        for (int i = 1; i < pids.length; i++) {
            long pid = pids[i];
            ProcessHandle c = ProcessHandle.of(pid).orElseThrow(() -> new AssertionError("the model's child " + pid + " is not running"));
            started.add(c);
            assertEquals(pids[0], ProcessGroupTest.pgrp(pid), "the model's child " + pid + " is in its stub's process group");
            out.add(c);
        }
        return out;
    }

    private static void awaitEnded(List<ProcessHandle> children) throws Exception {
        for (ProcessHandle c : children) {
            ProcessGroupTest.awaitEnded(c);
        }
    }

    @ParameterizedTest(name = "fork_stubs={0}")
    @ValueSource(booleans = {true, false})
    void unload_endsWhatTheModelStarted(boolean fork) throws Exception {
        try (Harness h = harness(fork)) {
            List<ProcessHandle> children = children(h);
            h.harness.unload();
            awaitEnded(children);
        }
    }

    @ParameterizedTest(name = "fork_stubs={0}")
    @ValueSource(booleans = {true, false})
    void stubKilledFromOutside_itsChildrenEnd_andTheRestartedStubsChildrenEndAtClose(boolean fork) throws Exception {
        List<ProcessHandle> second;
        try (Harness h = harness(fork)) {
            List<ProcessHandle> first = children(h);
            long stub = h.stub().pid();
            ProcessHandle.of(stub).orElseThrow().destroyForcibly(); // SIGKILL: the stub dies "by itself" as far as the host knows
            awaitEnded(first); // while the host still runs: the death, not the close, ended them
            h.awaitReady(60_000);
            assertNotEquals(stub, h.stub().pid(), "a new stub serves");
            second = children(h);
        }
        awaitEnded(second);
    }

    /**
     * A host that ends while a stub's clean-up is still under way (an instance close abandoned after its deadline, as Triton's
     * bls QA test makes happen): the backend's close kills the groups of the stubs still recorded, so their models' children do
     * not outlive the host. Here the backend is closed while the instance is still loaded.
     */
    @ParameterizedTest(name = "fork_stubs={0}")
    @ValueSource(booleans = {true, false})
    void backendClosedWhileTheStubRuns_itsGroupIsKilled(boolean fork) throws Exception {
        try (Harness h = harness(fork)) {
            List<ProcessHandle> children = children(h);
            ProcessHandle stub = ProcessHandle.of(h.stub().pid()).orElseThrow();
            h.harness.backend(PythonBackend.class).close();
            awaitEnded(children);
            ProcessGroupTest.awaitEnded(stub);
        }
    }

    @ParameterizedTest(name = "fork_stubs={0}")
    @ValueSource(booleans = {true, false})
    void stubKilledByTheHost_itsChildrenEnd(boolean fork) throws Exception {
        try (Harness h = harness(fork)) {
            List<ProcessHandle> children = children(h);
            h.stub().kill("the test kills it");
            awaitEnded(children);
            h.awaitReady(60_000);
        }
    }
}
