package io.backplane.core;

/** How the host decides which models of the repository are loaded (Triton's --model-control-mode). */
public enum ModelControlMode {
    /** Load every model in the repository at start; no load/unload afterwards. */
    NONE,
    /** Load only what {@code loadModel} names at start, then what {@code load}/{@code unload} say. */
    EXPLICIT,
    /** Like NONE, then rescan the repository periodically: load new or changed models, unload removed ones. */
    POLL;

    /** In EXPLICIT mode, the name {@code loadModel} takes for every model of the repository (Triton's {@code --load-model=*}). */
    public static final String ALL_MODELS = "*";
}
