package io.backplane.core.plugin;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.backplane.spi.Backend;
import io.backplane.spi.batch.Batcher;
import io.backplane.spi.Model;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.FrontendFactory;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every SPI method, default methods included, must be overridden by its class-loader-safe
 * delegate; otherwise a new SPI method would silently run plugin code under the host's context
 * class loader (STYLE 6, after Trino's ClassLoaderSafe* tests).
 */
class ClassLoaderSafeDelegatesTest {
    static List<Arguments> delegates() {
        return List.of(Arguments.of(Backend.class, ClassLoaderSafeBackend.class), Arguments.of(Model.class, ClassLoaderSafeModel.class),
                Arguments.of(ModelInstance.class, ClassLoaderSafeModelInstance.class), Arguments.of(Batcher.class, ClassLoaderSafeBatcher.class),
                Arguments.of(FrontendFactory.class, ClassLoaderSafeFrontendFactory.class),
                Arguments.of(Frontend.class, ClassLoaderSafeFrontendFactory.SafeFrontend.class));
    }

    @ParameterizedTest
    @MethodSource("delegates")
    void delegate_overridesEveryInterfaceMethod(Class<?> iface, Class<?> delegate) {
        List<String> missing = new ArrayList<>();
        for (Method m : iface.getMethods()) {
            if (Modifier.isStatic(m.getModifiers())) {
                continue;
            }
            try {
                Method impl = delegate.getMethod(m.getName(), m.getParameterTypes());
                if (impl.getDeclaringClass() != delegate) {
                    missing.add(m.toString());
                }
            } catch (NoSuchMethodException e) {
                missing.add(m.toString());
            }
        }
        assertEquals(List.of(), missing, delegate.getSimpleName() + " must override");
    }
}
