package io.backplane.backend.cuda;

import java.util.function.IntFunction;
import org.jspecify.annotations.Nullable;

/**
 * Turns a {@code CUresult} into a {@link CudaException}: the driver's own name and description
 * ({@code cuGetErrorName}/{@code cuGetErrorString}) when it knows the code, else
 * {@link CudaResults}' table, so that every error names its code even without a driver.
 */
final class CudaErrors {
    private CudaErrors() {
    }

    static CudaException exception(String call, int result, IntFunction<@Nullable String> driverName,
            IntFunction<@Nullable String> driverDescription, String suffix) {
        CudaResults.Entry entry = CudaResults.lookup(result);
        String name = driverName.apply(result);
        String description = driverDescription.apply(result);
        return new CudaException(call, result, name == null || name.isBlank() ? entry.name() : name,
                (description == null || description.isBlank() ? entry.description() : description) + suffix);
    }

    /** The exception for {@code result} from the Java table alone (fakes, no driver). */
    static CudaException exception(String call, int result) {
        return exception(call, result, r -> null, r -> null, "");
    }
}
