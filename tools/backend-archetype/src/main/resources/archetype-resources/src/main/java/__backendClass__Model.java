package ${package};

import io.backplane.spi.InstanceContext;
import io.backplane.spi.Model;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.config.ModelConfig;

/** One loaded model version: its config and factor. Instances share nothing, so there is nothing to close. */
record ${backendClass}Model(String name, ModelConfig config, float factor) implements Model {
    @Override
    public ModelInstance createInstance(InstanceContext context) {
        return new ${backendClass}Instance(name + " instance " + context.index(), config, factor);
    }

    @Override
    public void close() {
        // instances own nothing shared
    }
}
