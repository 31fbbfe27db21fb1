package io.backplane.core.internal;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.host.HostListener;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The host's listeners as one: every call fans out to each registered listener, and a listener
 * that throws is logged and skipped, never reaching the request or worker that reported the
 * event (B8). Listeners may be added while requests run. Thread-safe. Nothing of the host's own
 * warm-up models ({@link ModelRegistry#warmOwnPaths}) reaches them: no statistics or metrics of a
 * model no client can see. Their requests are warm-up requests, which never report to listeners,
 * and no client can reach them, so only the version and instance events need the check: the
 * per-request ones, on the hot path, stay without it.
 */
final class Listeners implements HostListener {
    private static final Logger log = LoggerFactory.getLogger(Listeners.class);

    private final List<HostListener> targets = new CopyOnWriteArrayList<>();

    Listeners(List<HostListener> initial) {
        targets.addAll(initial);
    }

    void add(HostListener l) {
        targets.add(requireNonNull(l, "listener is null"));
    }

    private static boolean hidden(String model) {
        return model.startsWith(ModelRegistry.OWN_WARMUP_PREFIX);
    }

    private void each(Consumer<HostListener> call) {
        for (HostListener l : targets) {
            try {
                call.accept(l);
            } catch (RuntimeException e) {
                log.warn("host listener {} failed", l, e);
            }
        }
    }

    @Override
    public void versionLoaded(String model, long version) {
        if (hidden(model)) {
            return;
        }
        each(l -> l.versionLoaded(model, version));
    }

    @Override
    public void versionLoaded(String model, long version, long loadNanos) {
        if (hidden(model)) {
            return;
        }
        each(l -> l.versionLoaded(model, version, loadNanos));
    }

    @Override
    public void versionUnloaded(String model, long version) {
        if (hidden(model)) {
            return;
        }
        each(l -> l.versionUnloaded(model, version));
    }

    @Override
    public void requestAccepted(String model, long version) {
        each(l -> l.requestAccepted(model, version));
    }

    @Override
    public void requestLeftQueue(String model, long version) {
        each(l -> l.requestLeftQueue(model, version));
    }

    @Override
    public void requestEnded(String model, long version, Outcome outcome, long queueNanos, long computeNanos) {
        each(l -> l.requestEnded(model, version, outcome, queueNanos, computeNanos));
    }

    /** Hot path (once per response): a plain loop, no capturing lambda. */
    @Override
    public void responseSent(String model, long version, boolean first, long nanos, long tokens) {
        for (HostListener l : targets) {
            try {
                l.responseSent(model, version, first, nanos, tokens);
            } catch (RuntimeException e) {
                log.warn("host listener {} failed", l, e);
            }
        }
    }

    @Override
    public void requestRejected(String model, Outcome outcome) {
        each(l -> l.requestRejected(model, outcome));
    }

    @Override
    public void batchExecuted(String model, long version, int requests, int batchSize) {
        each(l -> l.batchExecuted(model, version, requests, batchSize));
    }

    @Override
    public void instanceRestarted(String model, long version, String instance) {
        if (hidden(model)) {
            return;
        }
        each(l -> l.instanceRestarted(model, version, instance));
    }

    @Override
    public void instancesChanged(String model, long version, int instances) {
        if (hidden(model)) {
            return;
        }
        each(l -> l.instancesChanged(model, version, instances));
    }

    @Override
    public void duplicateReleaseSuppressed(String model, long version) {
        if (hidden(model)) {
            return;
        }
        each(l -> l.duplicateReleaseSuppressed(model, version));
    }

    @Override
    public void cacheLookup(String model, long version, boolean hit, long lookupNanos) {
        each(l -> l.cacheLookup(model, version, hit, lookupNanos));
    }

    @Override
    public void cacheInserted(String model, long version, long insertNanos) {
        each(l -> l.cacheInserted(model, version, insertNanos));
    }
}
