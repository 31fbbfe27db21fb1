package io.backplane.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.backplane.spi.InferenceRequest;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * The built-in warm-up is bounded: it sends no request once {@link Warmup#BUILTIN_BUDGET} has passed
 * (a request still running then is cancelled: BuiltinWarmupTest), where a model's own
 * {@code model_warmup} runs every request. The clock is the test's:
 * each request "takes" what the test says, nothing waits.
 */
class WarmupBudgetTest {
    private final AtomicLong now = new AtomicLong();
    private final AtomicInteger sent = new AtomicInteger();

    /** Runs one sample of 4 requests, each advancing the clock by {@code each}; how many were sent. */
    private int run(boolean builtIn, Duration each) {
        InferenceRequest r = InferenceRequest.builder("m").id("warmup").build();
        Warmup.run("m", List.of(new Warmup.Sample("s", r, 4, builtIn)), (request, sink) -> {
            sent.incrementAndGet();
            now.addAndGet(each.toNanos());
            sink.last(null);
            return null; // the state is used only to cancel a request that timed out
        }, now::get);
        return sent.get();
    }

    @Test
    void builtin_fastModel_sendsEveryRequest() {
        assertEquals(4, run(true, Warmup.BUILTIN_BUDGET.dividedBy(10)));
    }

    @Test
    void builtin_slowModel_stopsAfterTheRequestThatUsedUpTheBudget() {
        assertEquals(1, run(true, Warmup.BUILTIN_BUDGET.multipliedBy(30)), "a model of 30 budgets a request delays ready by one request");
    }

    @Test
    void builtin_budgetReachedMidway_stopsThere() {
        assertEquals(2, run(true, Warmup.BUILTIN_BUDGET.dividedBy(2)), "two half-budget requests use it up");
    }

    @Test
    void modelWarmup_ofTheModelsOwn_runsInFull_howeverSlow() {
        assertEquals(4, run(false, Warmup.BUILTIN_BUDGET.multipliedBy(30)));
    }
}
