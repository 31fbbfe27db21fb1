package io.backplane.core.internal;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.host.HostListener;
import io.backplane.spi.host.RequestHandle;
import io.backplane.spi.host.ResponseObserver;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The child requests (BLS calls) of one parent request: composition invariants C1 and C2.
 *
 * <p>A child is admitted through the host's registry like any request; its sink is a
 * {@link Link} that knows the parent, so the child's {@link RequestState} knows its ancestors.
 * When the parent ends, {@link #parentEnded} marks every open link done — the backend's
 * observer gets one CANCELLED error at once and nothing after it — and cancels the child
 * requests themselves, which then end through their own paths (L1). A link's observer calls are
 * made under the link's monitor, so a parent ending never interleaves with a child's response.
 *
 * <p>Cancelling an executing parent cancels its open children too (their responses still reach
 * the parent, which is still open), so a parent blocked on a child can end.
 *
 * <p>C2: a child whose target version is also the version of one of its executing ancestors
 * counts that ancestor as an instance held while waiting; when every instance of the target would
 * be held so, the call could never run, and it fails with UNAVAILABLE instead.
 */
final class ChildRequests {
    private static final Logger log = LoggerFactory.getLogger(ChildRequests.class);

    private final RequestState parent;
    private final Set<Link> open = new HashSet<>(); // guarded by this
    private boolean ended; // guarded by this

    ChildRequests(RequestState parent) {
        this.parent = parent;
    }

    RequestHandle start(InferenceRequest request, ResponseObserver observer, HostContext host) {
        requireNonNull(request, "request is null");
        requireNonNull(observer, "observer is null");
        Link link = new Link(this, observer);
        synchronized (this) {
            if (ended || parent.isClosed()) {
                throw new IllegalStateException(parent.describe() + " has ended; it cannot start child requests");
            }
            open.add(link);
        }
        try {
            if (request.trace() == io.backplane.spi.RequestTrace.NONE) {
                // A BLS step is traced as a child of its parent's trace (no-op when the parent is not traced).
                io.backplane.spi.RequestTrace t = parent.request().trace().child(request.modelName());
                if (t != io.backplane.spi.RequestTrace.NONE) {
                    request = request.toBuilder().trace(t).build();
                }
            }
            ModelRegistry registry = host.registry();
            RequestState child;
            for (int attempt = 0;; attempt++) {
                ModelVersion target = registry.route(request.modelName(), request.modelVersion());
                List<RequestState> holders = new ArrayList<>();
                for (RequestState r = parent; r != null; r = r.parent()) {
                    if (r.origin() == target.origin()) {
                        holders.add(r);
                    }
                }
                if (!holders.isEmpty()) {
                    target.selfCalls().hold(link, holders, target, parent);
                }
                try {
                    child = target.admit(request, link);
                    break;
                } catch (BackplaneException e) {
                    // Routed to a version a reload swapped out meanwhile: route again, once, as ModelRegistry.admit does.
                    if (e.code() != ErrorCode.UNAVAILABLE || attempt >= 1 || registry.isCurrent(target)) {
                        throw e;
                    }
                    link.releaseSelfCallHold();
                }
            }
            link.child = child;
            // The child may already run; a cancel that came before the line above is replayed here.
            if (link.cancelRequested || link.isDone() || parent.isCancelled()) {
                child.cancel();
            }
            return link;
        } catch (BackplaneException e) {
            if (!parent.warmUp()) {
                host.listener().requestRejected(request.modelName(), HostListener.Outcome.REJECTED);
            }
            link.failed(e);
            return link;
        } catch (RuntimeException e) {
            link.failed(BackplaneException.wrap(e, "child request of " + parent.describe() + " failed to start"));
            return link;
        }
    }

    /** Called once when the parent ends (any path): no child response reaches it from now on. */
    void parentEnded() {
        List<Link> links;
        synchronized (this) {
            ended = true;
            links = List.copyOf(open);
            open.clear();
        }
        for (Link l : links) {
            l.cancelByParent();
        }
    }

    /** The parent was cancelled while executing (B6): cancellation flows down to its open children. */
    void cancelOpen() {
        List<Link> links;
        synchronized (this) {
            links = List.copyOf(open);
        }
        for (Link l : links) {
            l.cancel();
        }
    }

    private synchronized void remove(Link l) {
        open.remove(l);
    }

    /** The sink of one child and the handle the backend holds. */
    static final class Link implements ResponseSink, RequestHandle {
        private final ChildRequests owner;
        private final ResponseObserver observer;
        volatile @Nullable RequestState child;
        /** Written before {@link #child} is read in cancel, read after it is written in start: no cancel is lost. */
        volatile boolean cancelRequested;
        /** Written under this link's monitor; read without it ({@link #isDone()}), so that no caller needs the monitor to ask. */
        private volatile boolean done;
        @Nullable Runnable releaseHold;

        Link(ChildRequests owner, ResponseObserver observer) {
            this.owner = owner;
            this.observer = observer;
        }

        RequestState parent() {
            return owner.parent;
        }

        /** Whether this child is a step of an ensemble (its observer is the ensemble scheduler's), not a backend's BLS call. */
        boolean ensembleStep() {
            return observer instanceof EnsembleScheduler.StepObserver;
        }

        @Override
        public synchronized void partial(InferenceResponse response) {
            if (!done) {
                call(() -> observer.onResponse(response));
            }
        }

        @Override
        public void last(@Nullable InferenceResponse last) {
            synchronized (this) {
                if (done) {
                    return;
                }
                done = true;
                if (last != null) {
                    call(() -> observer.onResponse(last));
                }
                call(observer::onComplete);
            }
            ended();
        }

        @Override
        public void failed(BackplaneException error) {
            synchronized (this) {
                if (done) {
                    return;
                }
                done = true;
                call(() -> observer.onError(error));
            }
            ended();
        }

        void cancelByParent() {
            cancelRequested = true;
            RequestState c = child;
            synchronized (this) {
                if (done) {
                    return;
                }
                done = true;
                call(() -> observer.onError(new BackplaneException(ErrorCode.CANCELLED, "the child request"
                        + (c == null ? "" : " #" + c.id()) + " was cancelled because its parent " + owner.parent.describe() + " ended")));
            }
            ended();
            if (c != null) {
                c.cancel();
            }
        }

        /** Drops the C2 hold taken for a target this link was not admitted to (a retry routes again). */
        void releaseSelfCallHold() {
            Runnable r;
            synchronized (this) {
                r = releaseHold;
                releaseHold = null;
            }
            if (r != null) {
                r.run();
            }
        }

        private void ended() {
            owner.remove(this);
            Runnable r;
            synchronized (this) {
                r = releaseHold;
                releaseHold = null;
            }
            if (r != null) {
                r.run();
            }
        }

        private void call(Runnable r) {
            try {
                r.run();
            } catch (RuntimeException | Error e) {
                log.warn("the observer of a child request of {} threw; ignored", owner.parent.describe(), e);
            }
        }

        @Override
        public long id() {
            RequestState c = child;
            return c == null ? 0 : c.id();
        }

        @Override
        public boolean cancel() {
            cancelRequested = true;
            RequestState c = child;
            return c == null ? !isDone() : c.cancel();
        }

        /**
         * Lock-free: {@link ChildRequests#start} asks it of a link whose monitor another thread may
         * hold while it calls an observer (cancelByParent → the ensemble's onError → a cancel that
         * needs the monitor of the link whose partial() is starting this child): taking the monitor
         * here closed that cycle into a deadlock (seen once in EnsembleTest.raceCancelAndReload).
         */
        @Override
        public boolean isDone() {
            return done;
        }
    }

    /** C2 bookkeeping of one model version: executing callers waiting for calls to their own version. */
    static final class SelfCalls {
        private final Map<RequestState, Integer> waiting = new HashMap<>();

        void hold(Link link, List<RequestState> holders, ModelVersion target, RequestState parent) {
            synchronized (this) {
                Set<RequestState> after = new HashSet<>(waiting.keySet());
                after.addAll(holders);
                int instances = target.instanceCount();
                if (after.size() >= instances) {
                    throw new BackplaneException(ErrorCode.UNAVAILABLE, parent.describe() + " calls " + target + " (its own model) but all "
                            + instances + " instance(s) of it are executing requests that wait for such calls; the call could never run."
                            + " Give the model more instances (instance_group count) or do not call the model from itself");
                }
                for (RequestState h : holders) {
                    waiting.merge(h, 1, Integer::sum);
                }
            }
            boolean alreadyDone;
            synchronized (link) {
                alreadyDone = link.done;
                if (!alreadyDone) {
                    link.releaseHold = () -> release(holders);
                }
            }
            if (alreadyDone) {
                release(holders);
            }
        }

        private synchronized void release(List<RequestState> holders) {
            for (RequestState h : holders) {
                waiting.computeIfPresent(h, (k, n) -> n == 1 ? null : n - 1);
            }
        }
    }
}
