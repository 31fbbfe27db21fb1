package io.backplane.testkit;

/**
 * What the kit checks, named as in DESIGN.md. Every failure message of the kit starts with
 * {@code [<id> <title>]}, e.g. {@code [L2 sender state]}, and names the request (the core's
 * request id {@code #n} and the kit's tag) that broke it.
 */
public enum Invariant {
    L1("exactly once"),
    L2("sender state"),
    L3("final-flag cleanup"),
    L5("errors are per request"),
    L6("missing response"),
    L7("bounded unload"),
    L8("instances"),
    L9("reload"),
    L10("shutdown"),
    B6("cancellation"),
    /**
     * The backend could not load the conformance model at all (not a reload): its
     * {@code createBackend}, {@code loadModel} or {@code createInstance} threw. The message carries
     * the backend's own error and, for an unexpected exception, where it was thrown.
     */
    LOAD("first load"),
    /** The declared {@link Capability capabilities} contradict the config or the behaviour. */
    CAPABILITIES("declared capabilities");

    private final String title;

    Invariant(String title) {
        this.title = title;
    }

    public String title() {
        return title;
    }

    /** {@code "[L2 sender state]"}. */
    public String label() {
        return "[" + (this == CAPABILITIES || this == LOAD ? "" : name() + " ") + title + "]";
    }
}
