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

    /**
     * One instance to create: its name, index within the version, kind, device, the index of its
     * group in the config, and that group's {@code rate_limiter} (null: none).
     */
    record Spec(String name, int index, InstanceKind kind, int deviceId, int group, @Nullable RateLimiterConfig rateLimiter) {
        Spec {
            requireNonNull(name, "name is null");
            requireNonNull(kind, "kind is null");
        }

        /** An instance whose group has no {@code rate_limiter}. */
        Spec(String name, int index, InstanceKind kind, int deviceId) {
            this(name, index, kind, deviceId, 0, null);
        }
    }

    static List<Spec> of(String model, ModelConfig config) {
        List<InstanceGroup> groups = groups(config);
        List<Spec> out = new ArrayList<>();
        for (int g = 0; g < groups.size(); g++) {
            InstanceGroup group = groups.get(g);
            int k = 0;
            for (int device : devices(group)) {
                for (int c = 0; c < group.count(); c++) {
                    out.add(one(model, config, g, device, out.size(), k++));
                }
            }
        }
        return List.copyOf(out);
    }

    /**
     * The fields of a config's raw tree that its typed accessors hold, or whose effect is compared
     * apart: compared through those, not as written.
     */
    private static final java.util.Set<String> TYPED = java.util.Set.of("name", "platform", "backend", "max_batch_size", "input", "output",
            "instance_group", "dynamic_batching", "sequence_batching", "version_policy", "model_transaction_policy", "parameters",
            "default_model_filename", "response_cache");

    /**
     * Whether {@code next} differs from {@code serving} only in the {@code count} of its instance
     * groups (same groups, in the same order, with the same kinds, devices and everything else),
     * and in at least one count: then the instances can change in place. The raw tree is compared
     * only in the sections the typed fields do not hold (a config read back from the config
     * endpoint writes the typed ones differently from the file).
     */
    static boolean countsOnly(ModelConfig serving, ModelConfig next) {
        List<InstanceGroup> a = serving.instanceGroups();
        List<InstanceGroup> b = next.instanceGroups();
        if (a.size() != b.size() || a.isEmpty()) {
            return false;
        }
        boolean counts = false;
        for (int i = 0; i < a.size(); i++) {
            if (!a.get(i).toBuilder().count(1).build().equals(b.get(i).toBuilder().count(1).build())) {
                return false;
            }
            counts |= a.get(i).count() != b.get(i).count();
        }
        return counts && serving.toBuilder().instanceGroups(b).raw(io.backplane.spi.config.ConfigNode.EMPTY).build()
                .equals(next.toBuilder().raw(io.backplane.spi.config.ConfigNode.EMPTY).build())
                && untyped(serving.raw()).equals(untyped(next.raw()))
                && ResponseCache.enabledFor(serving) == ResponseCache.enabledFor(next) // the config endpoint writes it, off or on
                && tensorExtras(serving.raw()).equals(tensorExtras(next.raw()));
    }

    /** What the typed tensors do not hold: each input's {@code format} and each output's {@code label_filename}, defaults filled in. */
    private static List<String> tensorExtras(io.backplane.spi.config.ConfigNode raw) {
        List<String> out = new ArrayList<>();
        for (var t : raw.sections("input")) {
            out.add("in " + t.value("name").orElse("") + " " + t.value("format").orElse("FORMAT_NONE"));
        }
        for (var t : raw.sections("output")) {
            out.add("out " + t.value("name").orElse("") + " " + t.value("label_filename").orElse(""));
        }
        out.sort(null);
        return out;
    }

    private static java.util.Map<String, Object> untyped(io.backplane.spi.config.ConfigNode raw) {
        java.util.Map<String, Object> out = new java.util.HashMap<>();
        for (String f : raw.fieldNames()) {
            if (!TYPED.contains(f)) {
                out.put(f, List.of(raw.values(f), raw.sections(f)));
            }
        }
        return out;
    }

    /** The groups instances are placed by: the config's, or one CPU-or-auto instance when it has none. */
    static List<InstanceGroup> groups(ModelConfig config) {
        return config.instanceGroups().isEmpty() ? List.of(InstanceGroup.of("", 1, InstanceKind.AUTO, List.of())) : config.instanceGroups();
    }

    /** The devices group {@code group} places {@code count} instances on, each. */
    static List<Integer> devices(InstanceGroup group) {
        return group.kind() == InstanceKind.GPU ? (group.gpus().isEmpty() ? List.of(0) : group.gpus()) : List.of(0);
    }

    /**
     * The spec of the {@code k}-th instance of group {@code g} (named {@code <group>_<k>}) on {@code device},
     * at {@code index} in the version; an instance added at run time takes a {@code k} and an index no other took.
     */
    static Spec one(String model, ModelConfig config, int g, int device, int index, int k) {
        InstanceGroup group = groups(config).get(g);
        String groupName = group.name().isEmpty() ? model + "_" + g : group.name();
        InstanceKind kind = group.kind() == InstanceKind.AUTO ? InstanceKind.CPU : group.kind();
        return new Spec(groupName + "_" + k, index, kind, device, g, group.rateLimiter());
    }
}
