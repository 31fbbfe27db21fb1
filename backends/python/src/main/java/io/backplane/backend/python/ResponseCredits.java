package io.backplane.backend.python;

import java.util.concurrent.CompletionStage;
import org.jspecify.annotations.Nullable;

/**
 * The host's half of decoupled-response flow control (<b>P9</b>): each response costs the stub one
 * of its {@link Wire#RESPONSE_CREDITS} response credits, and the ACK returns it. The ACK of a
 * non-final response that reached its request goes out only once the request's
 * {@link io.backplane.spi.ResponseSender#ready()} completes (its client drained, or the request
 * closed), from whatever thread completes it; a FINAL, an error and a dropped response are
 * acknowledged at once. Sending only queues ({@link ControlChannel#trySend}), so that thread never
 * blocks, and a stalled client stalls its producer after at most the stub's credits.
 */
final class ResponseCredits {
    private final ControlChannel channel;
    private final String tag;

    ResponseCredits(ControlChannel channel, String tag) {
        this.channel = channel;
        this.tag = tag;
    }

    /** The ACK frame's payload for a response: its token (non-zero: the stub's blocks it may free now). */
    static byte[] ack(long token) {
        return new Wire.Out(8).u64(token).toByteArray();
    }

    /** Returns the credit now. */
    void returnNow(byte[] ack) {
        channel.trySend(Wire.F_ACK, ack);
    }

    /** Returns the credit once {@code consumer} completes, or now when it is null. */
    void returnWhen(byte[] ack, @Nullable CompletionStage<Void> consumer) {
        if (consumer == null) {
            channel.trySend(Wire.F_ACK, ack);
        } else {
            // trySend only queues for the writer thread: safe from whatever thread completes the stage.
            consumer.whenComplete((v, t) -> channel.trySend(Wire.F_ACK, ack));
        }
    }

    /** When {@code r}'s consumer can take more; null (acknowledge at once) when the sender cannot tell. */
    @Nullable CompletionStage<Void> consumerReady(StubRequest r) {
        try {
            return r.sr.sender().ready();
        } catch (RuntimeException ex) {
            ControlChannel.log.warn("{}: the response sender of request {} failed to say whether its client is ready; not waiting for it",
                    tag, r.sr.id(), ex);
            return null;
        }
    }
}
