package io.backplane.spi.config;

/** What happens to a queued request whose queue timeout expires. */
public enum TimeoutAction {
    /** Answer it at once with DEADLINE_EXCEEDED. */
    REJECT,
    /** Move it behind requests that have not timed out; it still runs when load allows. */
    DELAY
}
