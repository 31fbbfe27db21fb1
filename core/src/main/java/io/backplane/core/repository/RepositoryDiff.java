package io.backplane.core.repository;

import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;

/**
 * What changed between two {@link ModelRepository#fingerprints()} snapshots, for poll mode.
 *
 * @param added names present only in the newer snapshot, sorted
 * @param removed names present only in the older snapshot, sorted
 * @param modified names in both whose fingerprint changed, sorted
 */
public record RepositoryDiff(Set<String> added, Set<String> removed, Set<String> modified) {
    public RepositoryDiff {
        added = java.util.Collections.unmodifiableSortedSet(new TreeSet<>(added));
        removed = java.util.Collections.unmodifiableSortedSet(new TreeSet<>(removed));
        modified = java.util.Collections.unmodifiableSortedSet(new TreeSet<>(modified));
    }

    public static RepositoryDiff between(Map<String, String> before, Map<String, String> after) {
        Set<String> added = new TreeSet<>();
        Set<String> removed = new TreeSet<>();
        Set<String> modified = new TreeSet<>();
        for (Map.Entry<String, String> e : after.entrySet()) {
            String old = before.get(e.getKey());
            if (old == null) {
                added.add(e.getKey());
            } else if (!Objects.equals(old, e.getValue())) {
                modified.add(e.getKey());
            }
        }
        for (String name : before.keySet()) {
            if (!after.containsKey(name)) {
                removed.add(name);
            }
        }
        return new RepositoryDiff(added, removed, modified);
    }

    public boolean isEmpty() {
        return added.isEmpty() && removed.isEmpty() && modified.isEmpty();
    }
}
