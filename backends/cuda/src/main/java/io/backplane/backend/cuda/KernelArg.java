package io.backplane.backend.cuda;

/**
 * One argument of a kernel launch, as the driver's {@code kernelParams} array passes it: a
 * device pointer or a scalar, each by the address of its value.
 */
public sealed interface KernelArg {
    /** The argument's size in bytes in {@code kernelParams}. */
    int byteSize();

    /** A device pointer ({@code CUdeviceptr}, 8 bytes). */
    record Pointer(long address) implements KernelArg {
        @Override
        public int byteSize() {
            return 8;
        }
    }

    /** A 32-bit signed integer. */
    record Int32(int value) implements KernelArg {
        @Override
        public int byteSize() {
            return 4;
        }
    }

    /** A 64-bit signed integer. */
    record Int64(long value) implements KernelArg {
        @Override
        public int byteSize() {
            return 8;
        }
    }

    /** A 32-bit float. */
    record Float32(float value) implements KernelArg {
        @Override
        public int byteSize() {
            return 4;
        }
    }

    /** A 64-bit float. */
    record Float64(double value) implements KernelArg {
        @Override
        public int byteSize() {
            return 8;
        }
    }
}
