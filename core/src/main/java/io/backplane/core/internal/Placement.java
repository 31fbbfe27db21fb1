package io.backplane.core.internal;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.RateLimiterConfig;
import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * Where a model version's instances run: its {@code instance_group}s turned into one
 * {@link Spec} per instance, in the order they are created. A group without a name is named
 * {@code <model>_<group index>}; a GPU group places {@code count} instances on each listed
 * device (device 0 when none is listed); a model without groups gets one instance.
 * A {@code KIND_AUTO} group that {@code BackendFit} left as it was runs on the CPU.
 *
 * <p>Pure: no state, no plugin calls. The list's size is the instance count the batcher is told.
 */
final class Placement {
    private Placement() {
    }

    /** One instance to create: its name, index within the version, kind and device, and its group's {@code rate_limiter} (null: none). */
    record Spec(String name, int index, InstanceKind kind, int deviceId, @Nullable RateLimiterConfig rateLimiter) {
        Spec {
            requireNonNull(name, "name is null");
            requireNonNull(kind, "kind is null");
        }

        /** An instance whose group has no {@code rate_limiter}. */
        Spec(String name, int index, InstanceKind kind, int deviceId) {
            this(name, index, kind, deviceId, null);
        }
    }

    static List<Spec> of(String model, ModelConfig config) {
        List<InstanceGroup> groups = config.instanceGroups().isEmpty()
                ? List.of(InstanceGroup.of("", 1, InstanceKind.AUTO, List.of())) : config.instanceGroups();
        List<Spec> out = new ArrayList<>();
        for (int g = 0; g < groups.size(); g++) {
            InstanceGroup group = groups.get(g);
            String groupName = group.name().isEmpty() ? model + "_" + g : group.name();
            List<Integer> devices = group.kind() == InstanceKind.GPU ? (group.gpus().isEmpty() ? List.of(0) : group.gpus()) : List.of(0);
            InstanceKind kind = group.kind() == InstanceKind.AUTO ? InstanceKind.CPU : group.kind();
            int k = 0;
            for (int device : devices) {
                for (int c = 0; c < group.count(); c++) {
                    out.add(new Spec(groupName + "_" + k++, out.size(), kind, device, group.rateLimiter()));
                }
            }
        }
        return List.copyOf(out);
    }
}
