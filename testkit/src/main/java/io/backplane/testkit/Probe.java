package io.backplane.testkit;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.ResponseSender;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;

/**
 * Wraps the backend under test at every SPI seam (factory, backend, model, instance, and each
 * request and sender handed to {@code execute}) and records what the backend does, so that the
 * kit can say which invariant broke from the backend's side and for which request. Calls into
 * the backend run with the backend's class loader as context class loader.
 */
final class Probe {
    final Ledger ledger = new Ledger();
    final AtomicInteger backendsCreated = new AtomicInteger();
    final AtomicInteger backendsClosed = new AtomicInteger();
    final AtomicInteger modelsLoaded = new AtomicInteger();
    final AtomicInteger modelsClosed = new AtomicInteger();
    final AtomicInteger instancesCreated = new AtomicInteger();
    final AtomicInteger instancesClosed = new AtomicInteger();
    final List<InstanceKind> instanceKinds = new CopyOnWriteArrayList<>();
    /** instance key → what it is executing now. */
    final Map<String, String> executing = new ConcurrentHashMap<>();
    private final Set<String> modelNames;
    private final ModelFiles files;
    private volatile @Nullable Gate gate;

    Probe(ConformanceModel model, Set<String> modelNames) {
        this.files = requireNonNull(model, "model is null").files();
        this.modelNames = Set.copyOf(modelNames);
    }

    BackendFactory wrap(BackendFactory factory) {
        return new ProbeFactory(factory);
    }

    void gate(@Nullable Gate g) {
        gate = g;
    }

    private void writeFiles(ModelContext ctx) {
        if (modelNames.contains(ctx.name())) {
            files.writeInto(ctx.modelDirectory(), ctx.versionDirectory());
        }
    }

    private final class ProbeFactory implements BackendFactory {
        private final BackendFactory delegate;
        private final ClassLoader loader;

        ProbeFactory(BackendFactory delegate) {
            this.delegate = requireNonNull(delegate, "backend() returned null");
            this.loader = ContextLoader.of(delegate);
        }

        @Override
        public String name() {
            return delegate.name();
        }

        @Override
        public Set<String> aliases() {
            return delegate.aliases();
        }

        @Override
        public int spiVersion() {
            return delegate.spiVersion();
        }

        @Override
        public io.backplane.spi.BackendCapabilities capabilities() {
            try (var _ = ContextLoader.swap(loader)) {
                return delegate.capabilities();
            }
        }

        @Override
        public Backend create(BackendContext context) throws Exception {
            try (var _ = ContextLoader.swap(loader)) {
                Backend b = requireNonNull(delegate.create(context), "BackendFactory.create returned null");
                backendsCreated.incrementAndGet();
                return new ProbeBackend(b, loader);
            }
        }
    }

    private final class ProbeBackend implements Backend {
        private final Backend delegate;
        private final ClassLoader loader;

        ProbeBackend(Backend delegate, ClassLoader loader) {
            this.delegate = delegate;
            this.loader = loader;
        }

        @Override
        public ModelConfig autoCompleteConfig(ModelContext context) throws Exception {
            writeFiles(context);
            try (var _ = ContextLoader.swap(loader)) {
                return delegate.autoCompleteConfig(context);
            }
        }

        @Override
        public Model loadModel(ModelContext context) throws Exception {
            writeFiles(context);
            try (var _ = ContextLoader.swap(loader)) {
                Model m = requireNonNull(delegate.loadModel(context), "Backend.loadModel returned null");
                modelsLoaded.incrementAndGet();
                return new ProbeModel(m, loader, context);
            }
        }

        @Override
        public int deviceCount() {
            try (var _ = ContextLoader.swap(loader)) {
                return delegate.deviceCount();
            }
        }

        @Override
        public void close() {
            try (var _ = ContextLoader.swap(loader)) {
                delegate.close();
            } finally {
                backendsClosed.incrementAndGet();
            }
        }
    }

    private final class ProbeModel implements Model {
        private final Model delegate;
        private final ClassLoader loader;
        private final ModelContext context;

        ProbeModel(Model delegate, ClassLoader loader, ModelContext context) {
            this.delegate = delegate;
            this.loader = loader;
            this.context = context;
        }

        @Override
        public ModelInstance createInstance(InstanceContext ictx) throws Exception {
            try (var _ = ContextLoader.swap(loader)) {
                ModelInstance i = requireNonNull(delegate.createInstance(ictx), "Model.createInstance returned null");
                instancesCreated.incrementAndGet();
                instanceKinds.add(ictx.kind());
                return new ProbeInstance(i, loader, context, ictx.name());
            }
        }

        @Override
        public void close() {
            try (var _ = ContextLoader.swap(loader)) {
                delegate.close();
            } finally {
                modelsClosed.incrementAndGet();
            }
        }
    }

    private final class ProbeInstance implements ModelInstance {
        private final ModelInstance delegate;
        private final ClassLoader loader;
        private final String key;
        private final String name;
        private final boolean decoupled;
        private final AtomicBoolean inExecute = new AtomicBoolean();

        ProbeInstance(ModelInstance delegate, ClassLoader loader, ModelContext model, String name) {
            this.delegate = delegate;
            this.loader = loader;
            this.name = name;
            this.key = model.name() + " v" + model.version() + " instance '" + name + "'";
            this.decoupled = model.config().decoupled();
        }

        @Override
        public void execute(List<ScheduledRequest> batch) throws Exception {
            if (!inExecute.compareAndSet(false, true)) {
                ledger.violation(Invariant.L8, key + ": execute was called while a previous execute had not returned (a core bug; please report it)");
            }
            List<ProbeRequest> wrapped = new ArrayList<>(batch.size());
            List<Long> ids = new ArrayList<>(batch.size());
            for (ScheduledRequest r : batch) {
                wrapped.add(new ProbeRequest(r, ledger.track(r, name), decoupled));
                ids.add(r.id());
            }
            for (ProbeRequest p : wrapped) {
                p.rec.batchRequests = wrapped.size();
            }
            boolean returned = false;
            try {
                Gate g = gate;
                if (g != null) {
                    g.pass(ids);
                }
                executing.put(key, wrapped.stream().map(p -> p.rec.describe()).toList().toString());
                try (var _ = ContextLoader.swap(loader)) {
                    delegate.execute(List.copyOf(wrapped));
                }
                returned = true;
            } finally {
                executing.remove(key);
                for (ProbeRequest p : wrapped) {
                    p.rec.executeReturned = true;
                    p.rec.returned.countDown();
                    if (returned && !decoupled && p.rec.finals.get() == 0 && !p.delegate.sender().isClosed()) {
                        ledger.violation(Invariant.L6, p.rec.describe() + ": " + key + " returned from execute without sending its response;"
                                + " a model that is not decoupled must send exactly one response with FINAL for every request before execute returns"
                                + " (the core answered it with an INTERNAL error)");
                    }
                }
                inExecute.set(false);
            }
        }

        @Override
        public boolean isReady() {
            return delegate.isReady();
        }

        @Override
        public void close() {
            try (var _ = ContextLoader.swap(loader)) {
                delegate.close();
            } finally {
                instancesClosed.incrementAndGet();
            }
        }
    }

    /** The request and sender the backend sees: records every send, then forwards it to the core. */
    private final class ProbeRequest implements ScheduledRequest, ResponseSender {
        final ScheduledRequest delegate;
        final Ledger.Rec rec;
        private final boolean decoupled;

        ProbeRequest(ScheduledRequest delegate, Ledger.Rec rec, boolean decoupled) {
            this.delegate = delegate;
            this.rec = rec;
            this.decoupled = decoupled;
        }

        @Override
        public long id() {
            return delegate.id();
        }

        @Override
        public InferenceRequest request() {
            return delegate.request();
        }

        @Override
        public ResponseSender sender() {
            return this;
        }

        @Override
        public boolean isCancelled() {
            boolean c = delegate.isCancelled();
            if (c) {
                rec.sawCancelled = true;
            }
            return c;
        }

        @Override
        public int batchSize() {
            return delegate.batchSize();
        }

        @Override
        public int priorityLevel() {
            return delegate.priorityLevel();
        }

        @Override
        public long arrivalNanos() {
            return delegate.arrivalNanos();
        }

        @Override
        public long timeoutOverrideMicros() {
            return delegate.timeoutOverrideMicros();
        }

        @Override
        public void send(@Nullable InferenceResponse response, int flags) {
            boolean fin = (flags & FINAL) != 0;
            if (rec.executeReturned) {
                rec.sentAfterReturn = true;
            }
            if (fin) {
                int n = rec.finals.incrementAndGet();
                if (n > 1) {
                    ledger.violation(Invariant.L2, rec.describe() + ": the backend sent FINAL " + n + " times; after the first FINAL the sender is"
                            + " CLOSED, every further send throws IllegalStateException and reaches no client — end each request exactly once");
                }
                if (response == null && !decoupled) {
                    ledger.violation(Invariant.L2, rec.describe() + ": the backend sent FINAL without a response, but the model is not decoupled:"
                            + " a plain model's FINAL must carry its one response");
                }
            } else {
                rec.partials.incrementAndGet();
                if (rec.finals.get() > 0) {
                    ledger.violation(Invariant.L2, rec.describe() + ": the backend sent a response after the request's FINAL; the sender is"
                            + " CLOSED after FINAL and the response reached no client");
                }
                if (!decoupled) {
                    ledger.violation(Invariant.L2, rec.describe() + ": the backend sent a response without FINAL, but the model is not decoupled:"
                            + " a plain model sends exactly one response, with FINAL");
                }
            }
            delegate.sender().send(response, flags);
        }

        @Override
        public boolean isClosed() {
            return delegate.sender().isClosed();
        }
    }
}
