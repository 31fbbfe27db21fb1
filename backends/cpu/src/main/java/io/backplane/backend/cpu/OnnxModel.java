package io.backplane.backend.cpu;

import static java.util.Objects.requireNonNull;

import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtSession;
import ai.onnxruntime.OrtSession.SessionOptions;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.Model;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One loaded ONNX model version. The session opened at load (to check the config against the
 * file) becomes the first instance's session; each further instance opens its own.
 */
final class OnnxModel implements Model {
    private static final Logger LOG = LoggerFactory.getLogger(OnnxModel.class);
    private static final AtomicInteger OPEN_SESSIONS = new AtomicInteger();

    private final String where;
    private final ModelConfig config;
    private final Path file;
    private final SessionSettings settings;
    private final AtomicReference<@Nullable OrtSession> spare;

    OnnxModel(String where, ModelConfig config, Path file, SessionSettings settings, OrtSession first) {
        this.where = requireNonNull(where, "where is null");
        this.config = requireNonNull(config, "config is null");
        this.file = requireNonNull(file, "file is null");
        this.settings = requireNonNull(settings, "settings is null");
        this.spare = new AtomicReference<>(requireNonNull(first, "first is null"));
    }

    /** The session settings every instance of this model opens with. */
    SessionSettings settings() {
        return settings;
    }

    /** The effective (checked, completed) configuration. */
    ModelConfig config() {
        return config;
    }

    @Override
    public ModelInstance createInstance(InstanceContext context) throws OrtException {
        if (context.kind() == InstanceKind.GPU) {
            throw new BackplaneException(ErrorCode.UNSUPPORTED, where + ": instance '" + context.name()
                    + "' is KIND_GPU but the cpu backend runs on the CPU only");
        }
        OrtSession session = spare.getAndSet(null);
        if (session == null) {
            session = createSession(file, settings, where);
        }
        return new OnnxInstance(this, where + " instance '" + context.name() + "'", session);
    }

    @Override
    public void close() {
        OrtSession session = spare.getAndSet(null);
        if (session != null) {
            closeSession(session, where);
        }
        LOG.debug("{}: closed", where);
    }

    /** Sessions of this class loader's cpu backend now open; for tests and diagnostics. */
    static int openSessions() {
        return OPEN_SESSIONS.get();
    }

    static OrtSession createSession(Path file, SessionSettings settings, String where) throws OrtException {
        OrtSession session;
        try (SessionOptions options = settings.toOptions()) {
            session = OnnxBackend.openSession(file, options, where);
        }
        OPEN_SESSIONS.incrementAndGet();
        return session;
    }

    static void closeSession(OrtSession session, String where) {
        try {
            session.close();
        } catch (OrtException | RuntimeException e) {
            LOG.warn("{}: closing the ONNX Runtime session failed", where, e);
        } finally {
            OPEN_SESSIONS.decrementAndGet();
        }
    }
}
