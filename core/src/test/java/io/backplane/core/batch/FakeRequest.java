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
        return OPEN;
    }

    /** A sender that stays open and accepts nothing: batcher unit tests never answer requests. */
    private static final ResponseSender OPEN = new ResponseSender() {
        @Override
        public void send(io.backplane.spi.@org.jspecify.annotations.Nullable InferenceResponse response, int flags) {
            throw new UnsupportedOperationException("a fake request has no sender");
        }

        @Override
        public boolean isClosed() {
            return false;
        }
    };

    @Override
    public boolean isCancelled() {
        return false;
    }

}
