package io.backplane.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectMethod;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.testkit.engine.EngineTestKit;
import org.junit.platform.testkit.engine.Event;
import org.junit.platform.testkit.engine.Events;

/**
 * The kit catches each broken backend of {@link BrokenBackends} with a message naming the
 * invariant and, where a request broke it, the request's id and tag. Each case runs one check of
 * the base class through JUnit's EngineTestKit and asserts on its outcome.
 */
class KitCatchesBrokenBackendsTest {
    private static final Pattern REQUEST = Pattern.compile("request #\\d+ \\(tag \\d+\\)");

    @AfterEach
    void releaseBlockedToyThreads() {
        ToyBackend.release.countDown();
        ToyBackend.release = new CountDownLatch(1);
        Await.until(() -> Thread.getAllStackTraces().keySet().stream()
                .noneMatch(t -> t.isAlive() && (t.getName().startsWith("toy-") || t.getName().startsWith("backplane-"))),
                Duration.ofSeconds(10), "the toy's and the host's threads to end once released");
    }

    /** Runs one check of {@code testClass} and returns the message it failed with. */
    private static String failure(Class<?> testClass, String check) {
        Events events = EngineTestKit.engine("junit-jupiter").selectors(selectMethod(testClass, check)).execute().testEvents();
        List<Event> failed = events.failed().list();
        assertEquals(1, failed.size(), () -> testClass.getSimpleName() + "." + check + " should fail; events: " + events.list());
        Throwable t = failed.getFirst().getPayload(TestExecutionResult.class).orElseThrow().getThrowable().orElseThrow();
        return t.getMessage();
    }

    private static String abortReason(Class<?> testClass, String check) {
        Events events = EngineTestKit.engine("junit-jupiter").selectors(selectMethod(testClass, check)).execute().testEvents();
        List<Event> aborted = events.aborted().list();
        assertEquals(1, aborted.size(), () -> testClass.getSimpleName() + "." + check + " should be aborted; events: " + events.list());
        return aborted.getFirst().getPayload(TestExecutionResult.class).orElseThrow().getThrowable().orElseThrow().getMessage();
    }

    private static void assertNamesRequest(String message) {
        assertTrue(REQUEST.matcher(message).find(), "the message names the request id and tag: " + message);
    }

    private static void assertStartsWith(String prefix, String message) {
        assertTrue(message.startsWith(prefix), "expected '" + prefix + "…', got: " + message);
    }

    @Test
    void doubleFinal_failsL2_namingTheRequest() {
        String m = failure(BrokenBackends.DoubleFinal.class, "requests_areEachAnsweredExactlyOnce_withTheirOwnResponse");
        assertStartsWith("[L2 sender state] request #", m);
        assertTrue(m.contains("(tag 1)") && m.contains("sent FINAL 2 times"), m);
    }

    @Test
    void sendAfterFinal_failsL2_namingTheRequest() {
        String m = failure(BrokenBackends.SendAfterFinal.class, "requests_areEachAnsweredExactlyOnce_withTheirOwnResponse");
        assertStartsWith("[L2 sender state]", m);
        assertTrue(m.contains("after the request's FINAL"), m);
        assertNamesRequest(m);
    }

    @Test
    void returnsWithoutAnswering_failsL6_namingTheRequest() {
        String m = failure(BrokenBackends.NoAnswer.class, "requests_areEachAnsweredExactlyOnce_withTheirOwnResponse");
        assertStartsWith("[L6 missing response] request #", m);
        assertTrue(m.contains("(tag 1)") && m.contains("returned from execute without sending its response"), m);
    }

    @Test
    void neverSendsFinal_failsL1_namingTheRequest() {
        String m = failure(BrokenBackends.NeverEnds.class, "requests_areEachAnsweredExactlyOnce_withTheirOwnResponse");
        assertStartsWith("[L1 exactly once] request #", m);
        assertTrue(m.contains("did not end within 3 s") && m.contains("3 response(s) and 0 FINAL(s)"), m);
    }

    @Test
    void answersWithAnotherRequestsPayload_failsL1_withTheCheck() {
        String m = failure(BrokenBackends.WrongRouting.class, "requests_areEachAnsweredExactlyOnce_withTheirOwnResponse");
        assertStartsWith("[L1 exactly once] request #", m);
        assertTrue(m.contains("failed the model's check") && m.contains("expected [1] for IN 1"), m);
    }

    @Test
    void staysInExecuteAfterFinal_failsL3() {
        String m = failure(BrokenBackends.LingersAfterFinal.class, "finalFlag_releasesTheRequest_soUnloadDoesNotWait");
        assertStartsWith("[L3 final-flag cleanup] request #", m);
        assertTrue(m.contains("had its FINAL, but the backend stayed inside execute 3000 ms after it"), m);
        assertNamesRequest(m);
    }

    @Test
    void failsEveryRequestAfterOneError_failsL5_namingBothRequests() {
        String m = failure(BrokenBackends.PoisonedAfterError.class, "errors_stayPerRequest");
        assertStartsWith("[L5 errors are per request] request #", m);
        assertTrue(m.contains("a valid request, ended with error INVALID_ARGUMENT") && m.contains("after the failing request #"), m);
    }

    @Test
    void failsTheWholeBatchForOneBadRequest_failsL5() {
        String m = failure(BrokenBackends.FailsWholeBatch.class, "errors_stayPerRequest");
        assertStartsWith("[L5 errors are per request] request #", m);
        assertTrue(m.contains("after the failing request #"), m);
    }

    @Test
    void cannotLoadBesideTheOldVersion_failsL9() {
        String m = failure(BrokenBackends.ReloadFails.class, "reload_whileRequestsRun_losesNoRequest");
        assertStartsWith("[L9 reload] reload #1 of model 'echo' failed while requests ran", m);
        assertTrue(m.contains("already loaded"), m);
    }

    @Test
    void cannotLoadConcurrently_failsL9() {
        String m = failure(BrokenBackends.LoadsOneAtATime.class, "concurrentModelLoads_eachModelServes");
        assertStartsWith("[L9 reload] loading model 'echo_kit", m);
        assertTrue(m.contains("concurrently with other models failed") && m.contains("already loading"), m);
    }

    @Test
    void leavesAThreadRunning_failsL10_namingTheThread() {
        String m = failure(BrokenBackends.LeaksThread.class, "requests_areEachAnsweredExactlyOnce_withTheirOwnResponse");
        assertStartsWith("[L10 shutdown] thread(s) still alive 5 s after the host closed: [toy-leaky]", m);
    }

    @Test
    void declaresCancellationButIgnoresIt_failsB6() {
        String m = failure(BrokenBackends.IgnoresCancellation.class, "cancellation_duringExecute_endsTheRequestOnce");
        assertStartsWith("[B6 cancellation] request #", m);
        assertTrue(m.contains("declares CANCELLATION") && m.contains("ended with success"), m);
    }

    @Test
    void observesCancellationWithoutDeclaringIt_failsCapabilities() {
        String m = failure(BrokenBackends.PlainOnly.class, "cancellation_duringExecute_endsTheRequestOnce");
        assertStartsWith("[declared capabilities] request #", m);
        assertTrue(m.contains("lacks CANCELLATION"), m);
    }

    @Test
    void neverReady_failsL8() {
        String m = failure(BrokenBackends.NeverReady.class, "requests_areEachAnsweredExactlyOnce_withTheirOwnResponse");
        assertStartsWith("[L8 instances] model 'echo' is not ready after its load returned", m);
    }

    @Test
    void closeBlocks_failsL7() {
        String m = failure(BrokenBackends.CloseBlocks.class, "unload_whileRequestsRun_endsEachOnce_withinTheDeadline_andReloads");
        assertStartsWith("[L7 bounded unload] after unloading model 'echo', 0 of 1 instance(s)", m);
        assertTrue(m.contains("close() did not return within the unload deadline"), m);
    }

    @Test
    void declaresDecoupledStreamingButAnswersInline_failsCapabilities() {
        String m = failure(BrokenBackends.AnswersInline.class, "streaming_concurrentStreams_eachEndsOnce");
        assertStartsWith("[declared capabilities] the backend declares DECOUPLED_STREAMING but answered all 8 requests inside execute", m);
    }

    @Test
    void loadsAnUndeclaredCapability_failsCapabilities() {
        String m = failure(BrokenBackends.AcceptsUndeclaredGpu.class, "undeclaredCapabilities_failToLoad_withUnsupported");
        assertStartsWith("[declared capabilities] model 'echo_kitgpu' asks for GPU", m);
        assertTrue(m.contains("ErrorCode.UNSUPPORTED"), m);
    }

    @Test
    void decoupledModelWithoutStreaming_failsCapabilities() {
        String m = failure(BrokenBackends.UndeclaredStreaming.class, "declaredCapabilities_matchTheModelConfig");
        assertStartsWith("[declared capabilities] backend 'toy': the model is decoupled", m);
        assertTrue(m.contains("declare Capability.STREAMING"), m);
    }

    @Test
    void undeclaredCapabilityCheck_isAbortedWithItsReason_neverPassed() {
        String r = abortReason(BrokenBackends.PlainOnly.class, "streaming_concurrentStreams_eachEndsOnce");
        assertTrue(r.contains("STREAMING not checked: the backend does not declare Capability.STREAMING"), r);
        r = abortReason(BrokenBackends.PlainOnly.class, "gpu_instancesOfKindGpu_serve");
        assertTrue(r.contains("GPU not checked"), r);
    }
}
