package io.backplane.spi.host;

import io.backplane.spi.InferenceResponse;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;

/**
 * For hosts only: addresses a backend's response to the model version and request it answers.
 * Backends never call it (the core stamps every response before a client or a frontend sees
 * it, whatever a backend put there); it lives here, outside {@link InferenceResponse}'s API, so
 * a backend author does not meet it. Thread-safe.
 */
public final class HostResponses {
    private static final MethodHandle STAMPED;

    static {
        try {
            STAMPED = MethodHandles.privateLookupIn(InferenceResponse.class, MethodHandles.lookup()).findVirtual(InferenceResponse.class,
                    "stamped", MethodType.methodType(InferenceResponse.class, String.class, long.class, String.class));
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private HostResponses() {
    }

    /** {@code response} addressed to {@code model} version {@code version} and the client's request id {@code id}. */
    public static InferenceResponse stamp(InferenceResponse response, String model, long version, String id) {
        try {
            return (InferenceResponse) STAMPED.invokeExact(response, model, version, id);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }
}
