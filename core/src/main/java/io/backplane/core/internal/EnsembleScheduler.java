package io.backplane.core.internal;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ResponseSender;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.EnsembleScheduling.Step;
import io.backplane.spi.host.HostListener.Outcome;
import io.backplane.spi.host.ResponseObserver;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.BooleanSupplier;
import org.jspecify.annotations.Nullable;

/**
 * The scheduler of one loaded ensemble version: a scheduler the core owns, in place of a batcher
 * and instances. An ensemble request is admitted like any request (its hold, id, statistics and
 * cancellation are the ordinary ones) and then handed here, where each step becomes a child
 * request ({@link RequestState#startChild}) of the ensemble request, routed through the composing
 * model's own scheduler and batcher, so ensemble traffic batches with direct traffic.
 *
 * <p>Concurrency: each request's {@link Run} keeps its tensors and counters under its own
 * monitor. A step's responses arrive on the composing model's threads; under the monitor the run
 * records the outputs and decides which steps are now ready (all inputs fresh) and whether the
 * request is complete; the steps are started and the ensemble's responses sent after the monitor
 * is released. A step is counted as running from that decision until its child ends, so the
 * request completes only after its last step ended. The ensemble request ends through its own
 * one release: a success FINAL, or {@link RequestState#terminate} with the first step error (C3);
 * that release cancels every still-open step (C1) and the run drops its tensors.
 *
 * <p>Decoupled steps: every response of a step refreshes its outputs, and a downstream step runs
 * again once all its inputs are fresh; each time every ensemble output is fresh the ensemble
 * sends a response. The final flag comes after the last step ended.
 */
final class EnsembleScheduler {
    private final EnsemblePlan plan;
    private final BooleanSupplier composingReady;
    private final HostContext host;

    EnsembleScheduler(EnsemblePlan plan, BooleanSupplier composingReady, HostContext host) {
        this.plan = requireNonNull(plan, "plan is null");
        this.composingReady = requireNonNull(composingReady, "composingReady is null");
        this.host = requireNonNull(host, "host is null");
    }

    EnsemblePlan plan() {
        return plan;
    }

    /** Whether every composing model has a ready version (Triton: an ensemble is not ready while one is missing). */
    boolean composingReady() {
        return composingReady.getAsBoolean();
    }

    /** Starts an admitted and dispatched ensemble request. Never throws: a failure ends the request. */
    void start(RequestState r) {
        if (!r.warmUp()) {
            host.listener().batchExecuted(r.origin().model(), r.origin().version(), 1, r.batchSize());
        }
        new Run(r).begin();
    }

    /** One ensemble request in flight. */
    private final class Run {
        private final RequestState request;
        /** Latest value of each ensemble tensor; cleared when the run ends. Guarded by this. */
        private final Map<String, Tensor> tensors = new HashMap<>();
        /** Per step, the input tensors refreshed since it last started. Guarded by this. */
        private final List<Set<String>> fresh = new ArrayList<>();
        /** Ensemble outputs refreshed since the last ensemble response. Guarded by this. */
        private final Set<String> freshOutputs = new HashSet<>();
        private int running; // guarded by this
        private boolean ended; // guarded by this
        private @Nullable InferenceResponse last; // guarded by this; a plain ensemble's response, sent at the end

        Run(RequestState request) {
            this.request = request;
            for (int i = 0; i < plan.steps().size(); i++) {
                fresh.add(new HashSet<>());
            }
        }

        void begin() {
            List<Launch> launches = new ArrayList<>();
            synchronized (this) {
                for (Tensor t : request.request().inputs()) {
                    tensors.put(t.name(), t);
                }
                for (Step s : plan.steps()) {
                    if (plan.producedInputs(s.index()).isEmpty()) {
                        readyLaunch(s, launches);
                    }
                }
            }
            if (launches.isEmpty()) {
                fail(BackplaneException.internal(request.describe() + ": no step of ensemble '" + plan.name() + "' reads only ensemble inputs"),
                        Outcome.BACKEND);
                return;
            }
            launchNow(launches); // never deferred: the thread that admitted the request may be waiting for its answer
        }

        /**
         * Adds {@code s} to {@code launches} if every input a step produces for it is fresh. Ensemble
         * inputs stay valid for the whole request (every response of a decoupled step reuses them);
         * an optional ensemble input the request lacks is left out. Holds this.
         */
        private void readyLaunch(Step s, List<Launch> launches) {
            if (!fresh.get(s.index()).containsAll(plan.producedInputs(s.index()))) {
                return;
            }
            List<Tensor> inputs = new ArrayList<>(s.inputMap().size());
            for (Map.Entry<String, String> e : s.inputMap().entrySet()) {
                Tensor t = tensors.get(e.getValue());
                if (t != null) {
                    inputs.add(t.name().equals(e.getKey()) ? t : t.withName(e.getKey())); // same data: a reference, not a copy
                }
            }
            fresh.get(s.index()).clear();
            running++;
            launches.add(new Launch(s, inputs));
        }

        /**
         * Starts the steps that {@code from}'s response made ready. On a thread with a trampoline they
         * start once the execute that answered has returned (perhaps on this thread, see
         * {@link StepTrampoline}); never so for a decoupled step, whose execute may go on streaming.
         */
        private void launch(Step from, List<Launch> launches) {
            if (launches.isEmpty() || !plan.stepDecoupled(from.index()) && StepTrampoline.defer(() -> launchNow(launches))) {
                return;
            }
            launchNow(launches);
        }

        private void launchNow(List<Launch> launches) {
            for (Launch l : launches) {
                Step s = l.step();
                InferenceRequest.Builder b = InferenceRequest.builder(s.modelName()).version(s.modelVersion()).inputs(l.inputs())
                        .id(request.request().id());
                for (String out : s.outputMap().keySet()) {
                    b.requestOutput(out);
                }
                if (request.request().timeoutMicros() > 0) {
                    b.timeoutMicros(request.request().timeoutMicros());
                }
                StepObserver observer = new StepObserver(s);
                try {
                    request.startChild(b.build(), observer);
                } catch (IllegalStateException e) {
                    observer.onError(new BackplaneException(ErrorCode.CANCELLED, request.describe() + " ended before " + s.describe() + " started"));
                } catch (RuntimeException e) {
                    observer.onError(BackplaneException.wrap(e, s.describe() + " failed to start"));
                }
            }
        }

        private void onStepResponse(Step s, InferenceResponse response) {
            BackplaneException error = response.error();
            if (error != null) {
                onStepFailed(s, error);
                return;
            }
            List<Launch> launches = new ArrayList<>();
            InferenceResponse partial = null;
            synchronized (this) {
                if (ended) {
                    return;
                }
                for (Map.Entry<String, String> e : s.outputMap().entrySet()) {
                    Tensor t = response.output(e.getKey());
                    if (t == null) {
                        endLocked();
                        error = BackplaneException.internal(s.describe() + " of ensemble '" + plan.name() + "' answered without output '" + e.getKey()
                                + "', which the ensemble maps to '" + e.getValue() + "'");
                        break;
                    }
                    tensors.put(e.getValue(), t.name().equals(e.getValue()) ? t : t.withName(e.getValue()));
                    for (int d : plan.downstream(s.index())) {
                        if (plan.steps().get(d).inputMap().containsValue(e.getValue())) {
                            fresh.get(d).add(e.getValue());
                        }
                    }
                    if (plan.outputs().contains(e.getValue())) {
                        freshOutputs.add(e.getValue());
                    }
                }
                if (error == null) {
                    for (int d : plan.downstream(s.index())) {
                        readyLaunch(plan.steps().get(d), launches);
                    }
                    if (freshOutputs.size() == plan.outputs().size()) {
                        freshOutputs.clear();
                        List<Tensor> outs = new ArrayList<>(plan.outputs().size());
                        for (String o : plan.outputs()) {
                            outs.add(tensors.get(o));
                        }
                        InferenceResponse r = InferenceResponse.of(outs);
                        if (plan.decoupled()) {
                            partial = r;
                        } else if (last != null) {
                            endLocked();
                            error = BackplaneException.internal(s.describe() + " of ensemble '" + plan.name() + "' sent more than one response,"
                                    + " but the ensemble is not decoupled (its composing models were not when it loaded); reload the ensemble");
                        } else {
                            last = r;
                        }
                    }
                }
            }
            if (error != null) {
                request.terminate(error, Outcome.BACKEND, "ensemble-step-output");
                return;
            }
            if (partial != null) {
                try {
                    request.send(partial, 0);
                } catch (IllegalStateException e) {
                    return; // the request ended meanwhile (cancel, unload): its steps are being cancelled
                }
            }
            launch(s, launches);
        }

        private void onStepEnded(Step s) {
            InferenceResponse response;
            synchronized (this) {
                running--;
                if (ended || running > 0) {
                    return;
                }
                endLocked();
                response = last;
            }
            BackplaneException missing = null;
            if (!plan.decoupled() && response == null) {
                missing = BackplaneException.internal("ensemble '" + plan.name() + "' ended without producing all its outputs " + plan.outputs()
                        + " (last step to end: " + s.describe() + ")");
            }
            if (missing != null) {
                request.terminate(missing, Outcome.BACKEND, "ensemble-incomplete");
                return;
            }
            try {
                request.send(response, ResponseSender.FINAL);
            } catch (IllegalStateException e) {
                // the request ended meanwhile (cancel, unload, deadline): it has its one answer already
            }
        }

        private void onStepFailed(Step s, BackplaneException cause) {
            synchronized (this) {
                if (ended) {
                    return;
                }
                endLocked();
            }
            BackplaneException e = new BackplaneException(cause.code(), "ensemble '" + plan.name() + "' " + s.describe() + " failed: "
                    + cause.getMessage(), cause);
            fail(e, cause.code() == ErrorCode.CANCELLED ? Outcome.CANCELED : Outcome.BACKEND);
        }

        /** Ends the request with {@code e}; its release cancels the open steps (C1). */
        private void fail(BackplaneException e, Outcome outcome) {
            synchronized (this) {
                endLocked();
            }
            request.terminate(e, outcome, "ensemble-step-failed");
        }

        /** Marks the run ended and drops every intermediate tensor. Holds this. */
        private void endLocked() {
            ended = true;
            tensors.clear();
        }

        /** The observer of one step's child request; its calls are serialized by the child's link. */
        private final class StepObserver implements EnsembleScheduler.StepObserver {
            private final Step step;
            private boolean done;

            StepObserver(Step step) {
                this.step = step;
            }

            @Override
            public void onResponse(InferenceResponse response) {
                onStepResponse(step, response);
            }

            @Override
            public void onComplete() {
                if (!done) {
                    done = true;
                    onStepEnded(step);
                }
            }

            @Override
            public void onError(BackplaneException error) {
                if (!done) {
                    done = true;
                    onStepFailed(step, error);
                }
            }
        }
    }

    private record Launch(Step step, List<Tensor> inputs) {
    }

    /** What marks a child request as an ensemble step (caller-runs may run it inline, see {@link StepTrampoline}). */
    interface StepObserver extends ResponseObserver {
    }
}
