package io.backplane.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

/** The per-thread trampoline that lets ensemble steps run one after the other on one thread. */
class StepTrampolineTest {
    @Test
    void noTrampoline_deferRefused_noInlineStep() {
        assertFalse(StepTrampoline.defer(() -> { }));
        assertFalse(StepTrampoline.mayRunStepInline(true));
    }

    @Test
    void run_deferredLaunchesRunAfterTheBody_inOrder_includingOnesTheyDefer() {
        List<String> order = new ArrayList<>();
        StepTrampoline.run(null, () -> {
            assertTrue(StepTrampoline.defer(() -> {
                order.add("first");
                assertTrue(StepTrampoline.defer(() -> order.add("third")));
            }));
            assertTrue(StepTrampoline.defer(() -> order.add("second")));
            order.add("body");
        });
        assertEquals(List.of("body", "first", "second", "third"), order);
        assertFalse(StepTrampoline.defer(() -> { }), "the trampoline ended with its run");
    }

    @Test
    void nestedRun_bodyRunsAtOnce_itsDeferralsGoToTheOuterTrampoline() {
        List<String> order = new ArrayList<>();
        StepTrampoline.run(null, () -> {
            StepTrampoline.run(() -> false, () -> {
                StepTrampoline.defer(() -> order.add("deferred"));
                order.add("inner");
            });
            order.add("outer");
        });
        assertEquals(List.of("inner", "outer", "deferred"), order);
    }

    @Test
    void mayRunStepInline_callerAnyStep_neverInsideAnExecute() {
        AtomicBoolean outside = new AtomicBoolean();
        AtomicBoolean inside = new AtomicBoolean(true);
        StepTrampoline.run(null, () -> {
            outside.set(StepTrampoline.mayRunStepInline(false));
            StepTrampoline t = StepTrampoline.executeStarted();
            try {
                inside.set(StepTrampoline.mayRunStepInline(true));
            } finally {
                StepTrampoline.executeEnded(t);
            }
        });
        assertTrue(outside.get(), "a caller with caller-runs runs any idle step");
        assertFalse(inside.get(), "executes never nest");
    }

    @Test
    void mayRunStepInline_worker_onlyQuickStepsAndOnlyWhileItsOwnQueueIsEmpty() {
        AtomicBoolean queueEmpty = new AtomicBoolean(true);
        List<Boolean> seen = new ArrayList<>();
        StepTrampoline.run(queueEmpty::get, () -> {
            seen.add(StepTrampoline.mayRunStepInline(true));
            seen.add(StepTrampoline.mayRunStepInline(false));
            queueEmpty.set(false);
            seen.add(StepTrampoline.mayRunStepInline(true));
        });
        assertEquals(List.of(true, false, false), seen);
    }
}
