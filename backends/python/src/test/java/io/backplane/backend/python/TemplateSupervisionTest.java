package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.testkit.Await;
import io.backplane.testkit.Reply;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * P11: the warm template is supervised like a stub, and a forked stub's death is known without it.
 * The faults are real signals to the real processes (SIGSTOP as a debugger, a cgroup freezer or a
 * paused container does; SIGKILL), injected while clients send requests; nothing is ever resumed
 * with SIGCONT, so every recovery below happened while the template was stopped or after the host
 * killed it. Synchronised on the processes' states and the instances' readiness, with deadlines.
 */
class TemplateSupervisionTest {
    /** Deadlines short enough for a test, long enough that a loaded machine does not trip a healthy stub. */
    private static final Map<String, String> SUPERVISED = Map.of(StubSettings.HEARTBEAT_INTERVAL, "100", StubSettings.HEARTBEAT_TIMEOUT, "2000",
            StubSettings.STALL_KILL, "2000", StubSettings.RESTART_BACKOFF_MAX, "200", StubSettings.STARTUP_TIMEOUT, "30000");
    private static final Duration RECOVERY = Duration.ofSeconds(60);

    @BeforeAll
    static void python() throws Exception {
        Harness.requirePython();
    }

    @AfterEach
    void clean() throws Exception {
        Harness.assertClean();
        StubForkTest.assertNoTemplates();
    }

    private static String state(long pid) {
        try {
            return StubForkTest.stat(pid)[0];
        } catch (IOException e) {
            return "gone";
        }
    }

    private static void signalGroup(long pid, String sig) throws Exception {
        Process p = new ProcessBuilder("kill", "-" + sig, "--", "-" + pid).inheritIO().start();
        assertTrue(p.waitFor(30, TimeUnit.SECONDS), "kill -" + sig + " -" + pid);
    }

    private static void awaitState(long pid, String expected) {
        Await.until(() -> state(pid).equals(expected) || state(pid).equals("gone"), Duration.ofSeconds(30),
                "process " + pid + " to reach state " + expected);
    }

    @Test
    void stoppedTemplate_aStubKilledMeanwhileIsKnownDeadWithItsSignal_restartsWithoutIt_andTheTemplateIsReplaced() throws Exception {
        try (Harness h = new Harness(StubForkTest.processInfo(2), SUPERVISED)) {
            StubTemplate t = StubForkTest.onlyTemplate(h);
            List<PythonInstance> instances = h.harness.instances(PythonInstance.class);
            long dead = instances.get(0).currentStub().pid();
            Harness.signal(t.pid(), "STOP");
            awaitState(t.pid(), "T");
            signalGroup(dead, "KILL");
            // its parent is stopped and cannot reap or report it: the pidfd confirms the death, with the zombie's status
            Await.until(() -> instances.get(0).currentStub().pid() != dead && instances.get(0).isReady(), RECOVERY,
                    "the killed stub to be replaced while its template is stopped");
            assertTrue(instances.get(0).lastFailure().contains("was ended by signal 9 (SIGKILL)"), instances.get(0).lastFailure());
            assertNotEquals(t.pid(), StubForkTest.ppid(instances.get(0).currentStub().pid()), "not a fork of the stopped template");
            // the template stays silent: the host kills it after its deadlines, and the next start makes a new one
            Await.until(() -> !t.isAlive(), RECOVERY, "the silent template to be killed");
            Await.until(() -> state(t.pid()).equals("gone"), RECOVERY, "the killed template to be reaped");
            long sibling = instances.get(1).currentStub().pid();
            signalGroup(sibling, "KILL");
            Await.until(() -> instances.get(1).currentStub().pid() != sibling && instances.get(1).isReady(), RECOVERY,
                    "the sibling to be replaced");
            StubTemplate next = StubForkTest.onlyTemplate(h);
            assertNotEquals(t.pid(), next.pid(), "a new template");
            assertEquals(next.pid(), StubForkTest.ppid(instances.get(1).currentStub().pid()), "forked from the new template");
            for (int i = 0; i < 4; i++) {
                StubForkTest.info(h, "");
            }
        }
    }

    @Test
    void templateReport_andPidfd_tellTheSameTruthfulStatus() throws Exception {
        try (Harness h = new Harness(StubForkTest.processInfo(1), SUPERVISED)) {
            PythonInstance instance = h.harness.instances(PythonInstance.class).get(0);
            long stub = instance.currentStub().pid();
            signalGroup(stub, "TERM");
            Await.until(() -> instance.currentStub().pid() != stub && instance.isReady(), RECOVERY, "the stub to be replaced");
            assertTrue(instance.lastFailure().contains("was ended by signal 15 (SIGTERM)"), instance.lastFailure());
            assertFalse(instance.lastFailure().contains("255"), instance.lastFailure());
        }
    }

    /**
     * Stops or kills the template, the stubs, or both, while four clients send requests: every
     * request ends once (none hangs past its deadline), the instances serve again without SIGCONT,
     * and a fault of the template alone fails no request at all.
     */
    @ParameterizedTest(name = "{1} {0}")
    @CsvSource({"template,STOP", "template,KILL", "stubs,STOP", "stubs,KILL", "both,STOP", "both,KILL"})
    void faultsUnderLoad_everyRequestEndsOnce_andTheInstancesServeAgain(String target, String signal) throws Exception {
        try (Harness h = new Harness(StubForkTest.processInfo(2), SUPERVISED, false)) {
            StubTemplate t = StubForkTest.onlyTemplate(h);
            List<PythonInstance> instances = h.harness.instances(PythonInstance.class);
            List<Long> stubs = StubForkTest.stubPids(h);
            AtomicBoolean stop = new AtomicBoolean();
            AtomicInteger ok = new AtomicInteger();
            AtomicInteger failed = new AtomicInteger();
            AtomicInteger hung = new AtomicInteger();
            AtomicInteger sent = new AtomicInteger();
            List<String> failures = java.util.Collections.synchronizedList(new ArrayList<>());
            List<Thread> clients = new ArrayList<>();
            for (int c = 0; c < 4; c++) {
                clients.add(Thread.ofPlatform().name("supervision-client-" + c).start(() -> {
                    while (!stop.get()) {
                        sent.incrementAndGet();
                        Reply reply = h.send(InferenceRequest.builder("process_info")
                                .input(Tensor.ofFloats("INPUT0", new long[] {1}, 1f)).build());
                        try {
                            InferenceResponse r = reply.await(); // within the harness's answer time-out, exactly once
                            if (r.isError()) {
                                failed.incrementAndGet();
                                failures.add(String.valueOf(r.error()));
                            } else {
                                ok.incrementAndGet();
                            }
                        } catch (AssertionError e) {
                            hung.incrementAndGet();
                            failures.add(e.getMessage());
                        } catch (InterruptedException e) {
                            return;
                        }
                        if (ThreadLocalRandom.current().nextInt(4) == 0) {
                            Thread.onSpinWait();
                        }
                    }
                }));
            }
            Await.until(() -> ok.get() >= 20, RECOVERY, "the clients to be served");
            boolean template = !target.equals("stubs");
            boolean stubsToo = !target.equals("template");
            if (template) {
                Harness.signal(t.pid(), signal);
            }
            if (stubsToo) {
                for (long s : stubs) {
                    signalGroup(s, signal);
                }
            }
            if (stubsToo) {
                for (int i = 0; i < instances.size(); i++) {
                    PythonInstance in = instances.get(i);
                    long old = stubs.get(i);
                    Await.until(() -> in.currentStub().pid() != old && in.isReady(), RECOVERY, "instance " + in + " to serve again");
                }
            }
            if (template) {
                Await.until(() -> !t.isAlive(), RECOVERY, "the " + (signal.equals("STOP") ? "silent" : "dead") + " template to be let go");
            }
            int before = ok.get();
            Await.until(() -> ok.get() >= before + 20, RECOVERY, "the clients to be served again");
            stop.set(true);
            for (Thread c : clients) {
                c.join(RECOVERY.plusSeconds(60).toMillis());
                assertFalse(c.isAlive(), c.getName() + " ended");
            }
            assertEquals(0, hung.get(), () -> "requests that did not end exactly once: " + failures);
            assertEquals(sent.get(), ok.get() + failed.get(), "every request ended exactly once");
            if (!stubsToo) {
                assertEquals(List.of(), failures, "a template fault fails no request: its stubs serve on");
            }
            // a restart now forks again, from a new template
            long victim = instances.get(0).currentStub().pid();
            signalGroup(victim, "KILL");
            Await.until(() -> instances.get(0).currentStub().pid() != victim && instances.get(0).isReady(), RECOVERY, "a last restart");
            if (template) {
                Await.until(() -> StubLauncher.templates(h.harness.backend(PythonBackend.class).socketDirectory()).stream()
                        .anyMatch(x -> x.pid() != t.pid()), RECOVERY, "a new template");
            }
            StubForkTest.info(h, "");
        }
    }
}
