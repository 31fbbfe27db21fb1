package io.backplane.core.batch;

import io.backplane.spi.InferenceRequest;
import io.backplane.spi.ResponseSender;
import io.backplane.spi.ScheduledRequest;

/** A bare {@link ScheduledRequest} for batcher unit checks that never reach the core. */
record FakeRequest(long id, InferenceRequest request, int batchSize, int priorityLevel, long arrivalNanos) implements ScheduledRequest {
    static FakeRequest withTimeout(long micros) {
        return new FakeRequest(1, BatchFixture.request("m", 1, 1, 0, micros), 1, 1, 0);
    }

    @Override
    public ResponseSender sender() {
        throw new UnsupportedOperationException("a fake request has no sender");
    }

    @Override
    public boolean isCancelled() {
        return false;
    }

    @Override
    public boolean isDone() {
        return false;
    }
}
