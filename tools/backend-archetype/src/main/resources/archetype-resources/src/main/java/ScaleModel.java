package ${package};

import io.backplane.spi.InstanceContext;
import io.backplane.spi.Model;
import io.backplane.spi.ModelInstance;

/** One loaded model version: its factor. Instances share nothing, so there is nothing to close. */
record ScaleModel(float factor) implements Model {
    @Override
    public ModelInstance createInstance(InstanceContext context) {
        return new ScaleInstance(factor);
    }

    @Override
    public void close() {
        // instances own nothing shared
    }
}
