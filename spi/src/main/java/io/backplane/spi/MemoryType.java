package io.backplane.spi;

/**
 * Where a tensor's bytes live.
 */
public enum MemoryType {
    /** Ordinary host memory (heap or native); readable by any thread. */
    CPU,
    /** Page-locked host memory, readable like {@link #CPU}, usable for asynchronous device copies. */
    CPU_PINNED,
    /**
     * Device memory of the GPU named by the tensor's device id. The segment's address is a device
     * pointer: host code must never dereference it; only a backend that owns that device may.
     */
    GPU
}
