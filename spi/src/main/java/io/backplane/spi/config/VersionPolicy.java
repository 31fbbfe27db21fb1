package io.backplane.spi.config;

import java.util.List;

/** Which numeric version folders of a model are served ({@code version_policy}). */
public sealed interface VersionPolicy {
    /** Triton's default: the newest version only. */
    VersionPolicy DEFAULT = new Latest(1);

    /** The {@code numVersions} highest versions. */
    record Latest(int numVersions) implements VersionPolicy {
        public Latest {
            if (numVersions < 1) {
                throw new IllegalArgumentException("version_policy.latest.num_versions " + numVersions + " must be ≥ 1");
            }
        }
    }

    /** Every version present. */
    record All() implements VersionPolicy {
    }

    /** Exactly these versions. */
    record Specific(List<Long> versions) implements VersionPolicy {
        public Specific {
            versions = List.copyOf(versions);
            if (versions.isEmpty()) {
                throw new IllegalArgumentException("version_policy.specific lists no versions");
            }
        }
    }

    /** The versions this policy selects out of {@code available}, in increasing order. */
    default List<Long> select(List<Long> available) {
        List<Long> sorted = available.stream().sorted().toList();
        return switch (this) {
            case Latest l -> sorted.subList(Math.max(0, sorted.size() - l.numVersions()), sorted.size());
            case All a -> sorted;
            case Specific s -> sorted.stream().filter(s.versions()::contains).toList();
        };
    }
}
