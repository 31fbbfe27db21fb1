package io.backplane.testkit;

import io.backplane.spi.BackendFactory;
import java.util.EnumSet;
import java.util.Set;

/** A healthy backend with a decoupled model, answering after execute returned, passes every applicable check. */
class ToyDecoupledConformanceTest extends BackendConformanceTest {
    @Override
    protected BackendFactory backend() {
        return new ToyBackend(Set.of());
    }

    @Override
    protected ConformanceModel model() {
        return ToyBackend.model(ToyBackend.decoupled());
    }

    @Override
    protected Set<Capability> capabilities() {
        return EnumSet.of(Capability.BATCHING, Capability.DECOUPLED_STREAMING, Capability.CANCELLATION);
    }
}
