package io.backplane.spi.host;

/** The state of one model version as the repository index reports it. */
public enum ModelState {
    LOADING,
    READY,
    UNLOADING,
    UNAVAILABLE
}
