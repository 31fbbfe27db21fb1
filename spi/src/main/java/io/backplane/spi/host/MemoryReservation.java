package io.backplane.spi.host;

/**
 * Bytes of the host's memory budget held by one request (O1), from before its body is read until
 * its response is sent. Obtained from {@link InferenceService#reserveMemory}; thread-safe.
 *
 * <p>{@link #close} returns every byte held, exactly once: a second call does nothing. A frontend
 * must close each reservation it took, on every path (response sent, error, connection closed).
 */
public interface MemoryReservation extends AutoCloseable {
    /** The bytes held now (0 after {@link #close}). */
    long bytes();

    /**
     * Holds {@code more} bytes too (a body whose length was not known in advance grows as it
     * arrives).
     *
     * @throws io.backplane.spi.BackplaneException RESOURCE_EXHAUSTED when the budget cannot hold
     *     them; the reservation then keeps what it held before
     * @throws IllegalArgumentException when {@code more} is negative
     * @throws IllegalStateException after {@link #close}
     */
    void grow(long more);

    /** Returns the bytes to the budget; idempotent. */
    @Override
    void close();

    /** A reservation against no budget (a host without one): it holds nothing and never refuses. */
    static MemoryReservation unlimited() {
        return new MemoryReservation() {
            @Override
            public long bytes() {
                return 0;
            }

            @Override
            public void grow(long more) {
                if (more < 0) {
                    throw new IllegalArgumentException("more " + more + " is negative");
                }
            }

            @Override
            public void close() {
            }
        };
    }

    /**
     * The budget's state, for metrics.
     *
     * @param limitBytes the budget ({@link Long#MAX_VALUE}: none)
     * @param heldBytes bytes held by open reservations now
     * @param refused requests refused because they did not fit, since the host started
     */
    record Usage(long limitBytes, long heldBytes, long refused) {
        /** A host without a budget. */
        public static final Usage NONE = new Usage(Long.MAX_VALUE, 0, 0);
    }
}
