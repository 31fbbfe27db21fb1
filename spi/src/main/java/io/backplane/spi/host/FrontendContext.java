package io.backplane.spi.host;

import java.util.Map;

/** What a frontend gets from the host. */
public interface FrontendContext {
    /** The host's serving API. */
    InferenceService service();

    /**
     * This frontend's options, e.g. {@code port=8000}, {@code host=0.0.0.0}; a port of 0 means
     * "pick a free one". Never null.
     */
    Map<String, String> options();

    /**
     * The host's run-time logging control, or null when the host offers none (then the frontends
     * do not serve the logging extension). The default is null.
     */
    default @org.jspecify.annotations.Nullable LogControl logControl() {
        return null;
    }
}
