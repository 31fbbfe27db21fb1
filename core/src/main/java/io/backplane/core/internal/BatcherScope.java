package io.backplane.core.internal;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.batch.BatcherContext;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Ticker;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.host.HostListener.Outcome;
import java.nio.file.Path;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The {@link BatcherContext} a batcher of one model version sees: the config, the clock, the
 * instance count, and {@link #reject}. A rejection ends only a request of this version that is
 * still queued, through the request's one release (L4, B8); anything else is logged and ignored.
 * It holds no reference to the version's lifecycle, so a batcher cannot reach past it.
 */
final class BatcherScope implements BatcherContext {
    private static final Logger log = LoggerFactory.getLogger(BatcherScope.class);

    private final ModelConfig config;
    private final long version;
    private final int instanceCount;
    private final Ticker ticker;
    private final RequestState.Origin origin;
    private final @Nullable Path modelDirectory;

    BatcherScope(ModelConfig config, long version, int instanceCount, Ticker ticker, RequestState.Origin origin, @Nullable Path modelDirectory) {
        this.modelDirectory = modelDirectory;
        this.config = requireNonNull(config, "config is null");
        this.version = version;
        this.instanceCount = instanceCount;
        this.ticker = requireNonNull(ticker, "ticker is null");
        this.origin = requireNonNull(origin, "origin is null");
    }

    @Override
    public ModelConfig config() {
        return config;
    }

    @Override
    public long version() {
        return version;
    }

    @Override
    public int instanceCount() {
        return instanceCount;
    }

    @Override
    public @Nullable Path modelDirectory() {
        return modelDirectory;
    }

    @Override
    public Ticker ticker() {
        return ticker;
    }

    @Override
    public void reject(ScheduledRequest request, BackplaneException error) {
        if (request instanceof RequestState r && r.belongsTo(origin)) {
            if (r.tryWithdraw()) {
                r.terminate(error, error.code() == ErrorCode.CANCELLED ? Outcome.CANCELED : Outcome.REJECTED, "batcher-reject");
            }
        } else {
            log.error("the batcher of model '{}' rejected {}, which is not one of its requests; ignored", config.name(), request);
        }
    }

    @Override
    public String toString() {
        return "batcher context of model '" + config.name() + "' version " + version;
    }
}
