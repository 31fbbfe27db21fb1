package io.backplane.spi.host;

/**
 * One entry of the repository index: a model (and version, 0 when none is loaded), its state and,
 * when it is not ready, why.
 */
public record ModelStatus(String name, long version, ModelState state, String reason) {
}
