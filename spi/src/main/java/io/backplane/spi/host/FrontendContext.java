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
}
