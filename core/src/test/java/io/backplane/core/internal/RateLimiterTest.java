package io.backplane.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.config.RateLimiterConfig;
import io.backplane.spi.config.RateLimiterConfig.Resource;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The rate limiter's pools and choices, driven step by step (no threads): Triton's documented
 * defaults and examples, the load errors, priorities, and that nothing stays held.
 */
class RateLimiterTest {
    private static RateLimiter on(RateLimiter.ResourceLimit... flags) {
        return new RateLimiter(new RateLimiter.Settings(true, List.of(flags)));
    }

    private static RateLimiterConfig needs(int priority, Resource... resources) {
        return RateLimiterConfig.of(List.of(resources), priority);
    }

    private static Resource r(String name, int count) {
        return Resource.of(name, false, count);
    }

    private static Resource global(String name, int count) {
        return Resource.of(name, true, count);
    }

    private static RateLimiter.Gate register(RateLimiter l, String instance, int device, RateLimiterConfig c) {
        RateLimiter.Gate g = l.register("m", 1, instance, device, c);
        assertNotNull(g, instance);
        return g;
    }

    /** Triton's rate_limiter.md example: A [R1:4, R2:4], B [R2:5, R3:10, R4:5], C [R1:1, R3:7, R4:2] on one device. */
    @Test
    void defaults_theMostAnyInstanceAsks_tritonExample() {
        RateLimiter l = on();
        register(l, "A", 0, needs(1, r("R1", 4), r("R2", 4)));
        register(l, "B", 0, needs(1, r("R2", 5), r("R3", 10), r("R4", 5)));
        RateLimiter.Gate c = register(l, "C", 0, needs(1, r("R1", 1), r("R3", 7), r("R4", 2)));
        assertEquals(Map.of("R1@0", 4, "R2@0", 5, "R3@0", 10, "R4@0", 5), l.pools());
        c.close();
        assertEquals(Map.of("R1@0", 4, "R2@0", 5, "R3@0", 10, "R4@0", 5), l.pools(), "C asked for no maximum");
    }

    /** The defaults follow what is loaded: an unload lowers them again. */
    @Test
    void defaults_recomputedWhenAnInstanceGoes() {
        RateLimiter l = on();
        register(l, "small", 0, needs(1, r("R", 2)));
        RateLimiter.Gate big = register(l, "big", 0, needs(1, r("R", 6)));
        assertEquals(Map.of("R@0", 6), l.pools());
        big.close();
        big.close(); // idempotent
        assertEquals(Map.of("R@0", 2), l.pools());
        assertEquals(1, l.registered());
    }

    /** Triton's example on two devices: --rate-limit-resource=R1:10 R2:5:0 R2:8:1 R3:2, R3 global in a model. */
    @Test
    void explicit_perDeviceAndGlobal_tritonExample() {
        RateLimiter l = on(new RateLimiter.ResourceLimit("R1", 10, -1), new RateLimiter.ResourceLimit("R2", 5, 0),
                new RateLimiter.ResourceLimit("R2", 8, 1), new RateLimiter.ResourceLimit("R3", 2, -1));
        register(l, "d0", 0, needs(1, r("R1", 1), r("R2", 1), global("R3", 1)));
        register(l, "d1", 1, needs(1, r("R1", 1), r("R2", 1), global("R3", 1)));
        assertEquals(Map.of("R1@0", 10, "R2@0", 5, "R1@1", 10, "R2@1", 8, "R3", 2), l.pools());
    }

    /** A global resource given per device takes the largest count given (Triton ignores the device of a global resource). */
    @Test
    void explicit_globalResourceGivenPerDevice_takesTheLargest() {
        RateLimiter l = on(new RateLimiter.ResourceLimit("G", 3, 0), new RateLimiter.ResourceLimit("G", 5, 1));
        register(l, "a", 0, needs(1, global("G", 4)));
        assertEquals(Map.of("G", 5), l.pools());
    }

    @Test
    void explicit_fewerThanAnInstanceNeeds_refusedNamingBoth() {
        RateLimiter l = on(new RateLimiter.ResourceLimit("R1", 2, -1));
        BackplaneException e = assertThrows(BackplaneException.class, () -> l.register("m", 1, "m_0_0", 0, needs(1, r("R1", 4))));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("needs 4 of rate_limiter resource 'R1' on device 0 but --rate-limit-resource gives 2")
                && e.getMessage().contains("--rate-limit-resource=R1:4:0") && e.getMessage().contains("m_0_0"), e.getMessage());
        assertEquals(0, l.registered(), "nothing registered by a refused instance");
    }

    /** A name given for another device only leaves this device with none: the instance could never run. */
    @Test
    void explicit_givenForAnotherDeviceOnly_refused() {
        RateLimiter l = on(new RateLimiter.ResourceLimit("R2", 5, 0));
        BackplaneException e = assertThrows(BackplaneException.class, () -> l.register("m", 1, "gpu1", 1, needs(1, r("R2", 1))));
        assertTrue(e.getMessage().contains("gives 0"), e.getMessage());
    }

    @Test
    void globalAndPerDeviceUnderOneName_refused() {
        RateLimiter l = on();
        register(l, "a", 0, needs(1, global("R", 1)));
        BackplaneException e = assertThrows(BackplaneException.class, () -> l.register("m", 1, "b", 0, needs(1, r("R", 1))));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("'R' is per-device in model 'm' version 1 instance 'b' but global in model 'm' version 1 instance 'a'"),
                e.getMessage());
    }

    @Test
    void off_orNoResources_noGate() {
        RateLimiter off = new RateLimiter(RateLimiter.Settings.OFF);
        assertNull(off.register("m", 1, "a", 0, needs(1, r("R", 1))), "off ignores resources");
        RateLimiter l = on();
        assertNull(l.register("m", 1, "a", 0, null), "no rate_limiter");
        assertNull(l.register("m", 1, "a", 0, needs(3)), "priority only");
        assertNull(l.register("m", 1, "a", 0, needs(1, r("R", 0))), "count 0 holds nothing");
        assertEquals(0, l.registered());
    }

    /** Per-device pools are separate: an instance on device 1 is not held back by one on device 0, a global pool is shared. */
    @Test
    void perDevice_separatePools_globalShared() {
        RateLimiter l = on();
        RateLimiter.Gate d0 = register(l, "d0", 0, needs(1, r("R", 1)));
        RateLimiter.Gate d1 = register(l, "d1", 1, needs(1, r("R", 1)));
        RateLimiter.Gate cpu = register(l, "cpu", 0, needs(1, r("R", 1))); // a CPU instance counts as device 0
        d0.executed(true);
        d1.executed(true);
        cpu.executed(true);
        assertTrue(d0.granted() && d1.granted(), "one pool per device");
        assertFalse(cpu.granted(), "device 0's one copy is held");
        d0.executed(false);
        assertTrue(cpu.granted(), "released to the waiter on the same device");
        cpu.idle();
        d1.idle();
        assertFalse(d0.claimed() || d1.claimed() || cpu.claimed());
    }

    /**
     * Priority 1 against priority 2 on one copy, both always waiting: the limiter chooses by
     * executions × priority, so priority 1 runs twice as often (Triton: "half the scheduling chances").
     *
     * <p>Regression: the first version returned the resources (granting them to the only other
     * waiter) before it staged the instance that had just executed with work still queued, so the
     * two always alternated, 150 against 150, whatever their priorities. Return and re-staging are
     * now one step.
     */
    @Test
    void priority_twoAgainstOne_halfTheChances() {
        RateLimiter l = on();
        RateLimiter.Gate a = register(l, "a", 0, needs(1, global("R", 1)));
        RateLimiter.Gate b = register(l, "b", 0, needs(2, global("R", 1)));
        a.executed(true); // staged with work queued: a is granted (alone)
        b.executed(true); // b waits
        int[] runs = new int[2];
        for (int i = 0; i < 300; i++) {
            RateLimiter.Gate running = a.granted() ? a : b;
            assertFalse(a.granted() && b.granted(), "one copy: never both");
            runs[running == a ? 0 : 1]++;
            running.executed(true); // its execute ended with more work queued: staged again in the same step
        }
        assertEquals(200, runs[0], "priority 1: " + runs[0] + ", priority 2: " + runs[1]);
        assertEquals(100, runs[1]);
        a.close();
        b.close();
        assertEquals(0, l.registered());
    }

    /** Equal priorities alternate: each execution moves the instance behind the other. */
    @Test
    void priority_equal_alternate() {
        RateLimiter l = on();
        RateLimiter.Gate a = register(l, "a", 0, needs(1, global("R", 1)));
        RateLimiter.Gate b = register(l, "b", 0, needs(0, global("R", 1))); // 0 counts as 1
        a.executed(true);
        b.executed(true);
        StringBuilder order = new StringBuilder();
        for (int i = 0; i < 6; i++) {
            RateLimiter.Gate running = a.granted() ? a : b;
            order.append(running == a ? 'a' : 'b');
            running.executed(true);
        }
        assertEquals("ababab", order.toString());
    }

    /** An instance loaded late starts level with the least-served one: it does not take every turn until its count catches up. */
    @Test
    void lateInstance_startsLevel_doesNotMonopolize() {
        RateLimiter l = on();
        RateLimiter.Gate old = register(l, "old", 0, needs(1, global("R", 1)));
        old.executed(true);
        for (int i = 0; i < 1_000; i++) {
            old.executed(true); // alone: it runs 1000 times
        }
        RateLimiter.Gate late = register(l, "late", 0, needs(1, global("R", 1)));
        late.executed(true); // waits behind old
        StringBuilder order = new StringBuilder();
        for (int i = 0; i < 6; i++) {
            RateLimiter.Gate running = old.granted() ? old : late;
            order.append(running == old ? 'o' : 'l');
            running.executed(true);
        }
        assertEquals("ololol", order.toString());
        old.close();
        late.close();
    }

    /** A large claim that does not fit blocks its resource for later waiters (it is not starved), but not other resources. */
    @Test
    void blockedWaiter_keepsItsResource_notOthers() {
        RateLimiter l = on();
        RateLimiter.Gate small1 = register(l, "small1", 0, needs(1, r("R", 1)));
        RateLimiter.Gate big = register(l, "big", 0, needs(1, r("R", 2)));
        RateLimiter.Gate small2 = register(l, "small2", 0, needs(1, r("R", 1)));
        RateLimiter.Gate other = register(l, "other", 0, needs(1, r("S", 1)));
        small1.executed(true); // holds 1 of 2
        big.executed(true); // needs 2: waits
        small2.executed(true); // 1 would fit, but big waits ahead of it on R
        other.executed(true); // S is free
        assertTrue(small1.granted());
        assertFalse(big.granted());
        assertFalse(small2.granted(), "behind the larger claim on R");
        assertTrue(other.granted(), "S is not blocked by a wait on R");
        small1.executed(false);
        assertTrue(big.granted());
        big.executed(false);
        assertTrue(small2.granted());
        small2.idle();
        other.idle();
        small1.idle();
    }

    /** An idle instance holds nothing: a claim it cannot use goes back, and its execution is not counted. */
    @Test
    void idle_dropsClaim_countsNothing() {
        RateLimiter l = on();
        RateLimiter.Gate a = register(l, "a", 0, needs(1, global("R", 1)));
        RateLimiter.Gate b = register(l, "b", 0, needs(1, global("R", 1)));
        a.executed(true);
        assertTrue(a.granted());
        a.idle(); // found no batch
        assertFalse(a.claimed());
        b.executed(true);
        assertTrue(b.granted(), "a's unused copy went back");
        a.executed(true); // waits
        b.idle();
        assertTrue(a.granted(), "a was not charged for the claim it dropped: it is granted once b lets go");
        a.close(); // close drops what it holds
        b.executed(true);
        assertTrue(b.granted());
        b.close();
        assertEquals(0, l.registered());
    }
}
