package io.backplane.testkit;

import java.util.ArrayDeque;
import java.util.Collection;
import java.util.Deque;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;

/**
 * What a backend can do beyond the contract every backend keeps. A backend declares its
 * capabilities in {@link BackendConformanceTest#capabilities()}; a capability may imply others
 * (see {@link #implied()}), and the kit always works with the {@linkplain #closure closure}.
 *
 * <p>How the kit treats each capability is documented in {@code docs/writing-a-backend.md}:
 * a declared capability is verified and fails loudly when the backend does not behave as
 * declared; an undeclared one that a model config can ask for must make the load fail with
 * {@link io.backplane.spi.ErrorCode#UNSUPPORTED} (or {@code INVALID_ARGUMENT}); a check that does
 * not apply to the conformance model is reported as aborted with the reason, never passed.
 */
public enum Capability {
    /**
     * Decoupled models ({@code decoupled: true}): any number of responses per request, then one
     * FINAL. Verified with a decoupled conformance model through {@code stream()}.
     */
    STREAMING,
    /**
     * Responses of a decoupled model may come from another thread after {@code execute}
     * returned. Implies {@link #STREAMING}. The kit fails a backend that declares it but answers
     * every request inside {@code execute}.
     */
    DECOUPLED_STREAMING(STREAMING),
    /**
     * {@code max_batch_size > 0}: {@code execute} takes batches of several requests. Verified
     * with a batch the kit forms itself, each request of it answered once with its own response.
     */
    BATCHING,
    /**
     * The backend observes {@link io.backplane.spi.ScheduledRequest#isCancelled()} and ends a
     * cancelled request early with {@link io.backplane.spi.ErrorCode#CANCELLED}.
     */
    CANCELLATION,
    /** Instances of kind GPU ({@code instance_group { kind: KIND_GPU }}). */
    GPU;

    private final List<Capability> implied;

    Capability(Capability... implied) {
        this.implied = List.of(implied);
    }

    /** The capabilities this one implies directly. */
    public List<Capability> implied() {
        return implied;
    }

    /** {@code declared} plus everything it implies, transitively. */
    public static Set<Capability> closure(Collection<Capability> declared) {
        Set<Capability> out = EnumSet.noneOf(Capability.class);
        Deque<Capability> todo = new ArrayDeque<>(declared);
        while (!todo.isEmpty()) {
            Capability c = todo.pop();
            if (out.add(c)) {
                todo.addAll(c.implied);
            }
        }
        return out;
    }
}
