package io.backplane.spi.config;

import static java.util.Objects.requireNonNull;

import java.util.List;

/**
 * One {@code instance_group}: {@code count} instances of {@code kind}; for GPU, {@code count}
 * instances on each device listed in {@code gpus}. When {@code gpus} is empty the core places the
 * group on device 0 (it does not enumerate devices; Triton would use every visible GPU).
 */
public record InstanceGroup(String name, int count, InstanceKind kind, List<Integer> gpus) {
    public InstanceGroup {
        requireNonNull(name, "name is null");
        requireNonNull(kind, "kind is null");
        gpus = List.copyOf(gpus);
        if (count < 1) {
            throw new IllegalArgumentException("instance_group '" + name + "': count " + count + " must be ≥ 1");
        }
    }
}
