package io.backplane.plugin.http;

import io.netty.channel.Channel;
import io.netty.util.Attribute;
import io.netty.util.AttributeKey;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * Flow control for a reply written in parts (DESIGN P9: a slow client slows the model): a stream's
 * {@code ready()} waits on {@link #writable}; the {@link RestRouter} calls {@link #wake} on every
 * writability change to writable and on channel inactive. Owns that no wake-up is lost: a waiter
 * is queued before writability is read again, and the event drains the queue after the channel
 * turned writable. Waiters live in a channel attribute, so they are per connection and go with it.
 */
final class Writability {
    private static final CompletionStage<Void> READY = CompletableFuture.completedStage(null);
    /** Per connection: flow-control waiters of an event stream whose channel was not writable. */
    private static final AttributeKey<Queue<CompletableFuture<Void>>> WAITING = AttributeKey.valueOf(Writability.class, "waitingForWritable");

    private Writability() {
    }

    /**
     * Completes when {@code ch} can take more writes (its outbound buffer fell under the low water
     * mark) or is closed; at once if it can now.
     */
    static CompletionStage<Void> writable(Channel ch) {
        if (ch.isWritable() || !ch.isActive()) {
            return READY;
        }
        Attribute<Queue<CompletableFuture<Void>>> a = ch.attr(WAITING);
        Queue<CompletableFuture<Void>> q = a.get();
        if (q == null) {
            Queue<CompletableFuture<Void>> fresh = new ConcurrentLinkedQueue<>();
            q = a.setIfAbsent(fresh);
            if (q == null) {
                q = fresh;
            }
        }
        CompletableFuture<Void> w = new CompletableFuture<>();
        q.add(w);
        if (ch.isWritable() || !ch.isActive()) {
            wake(ch);
        }
        return w;
    }

    /** Completes every waiter of {@code ch}: it turned writable or inactive. */
    static void wake(Channel ch) {
        Queue<CompletableFuture<Void>> q = ch.attr(WAITING).get();
        if (q == null) {
            return;
        }
        CompletableFuture<Void> w;
        while ((w = q.poll()) != null) {
            w.complete(null);
        }
    }
}
