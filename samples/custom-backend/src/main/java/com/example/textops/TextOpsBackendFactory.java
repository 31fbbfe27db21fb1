package com.example.textops;

import io.backplane.spi.Backend;
import io.backplane.spi.BackendCapabilities;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.Spi;
import io.backplane.spi.config.InstanceKind;

/**
 * The {@code textops} backend: string operations on a BYTES tensor. Registered in
 * {@code META-INF/services/io.backplane.spi.BackendFactory}; cheap to construct.
 */
public final class TextOpsBackendFactory implements BackendFactory {
    public static final String NAME = "textops";

    @Override
    public String name() {
        return NAME;
    }

    /** No platforms or model files of its own; CPU; answers one request at a time, once. */
    @Override
    public BackendCapabilities capabilities() {
        return BackendCapabilities.builder().preferredInstanceKind(InstanceKind.CPU).batching(false).decoupled(false).build();
    }

    @Override
    public int spiVersion() {
        return Spi.VERSION; // copied in at compile time: the host learns which SPI we were built against
    }

    @Override
    public Backend create(BackendContext context) {
        return new TextOpsBackend(context);
    }
}
