package io.backplane.core.internal;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.metrics.Metric;
import io.backplane.spi.metrics.MetricFamily;
import io.backplane.spi.metrics.MetricFamilySnapshot;
import io.backplane.spi.metrics.MetricKind;
import io.backplane.spi.metrics.MetricRegistry;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.regex.Pattern;

/**
 * The host-wide custom-metrics registry (Triton's custom metric families). Families and series
 * are reference-counted: each {@link MetricFamily} or {@link Metric} handed out is one reference,
 * and a family or series disappears when its last reference closes. A model version's
 * {@link Scope} closes every reference it handed out when the version unloads.
 */
public final class CustomMetrics {
    private static final Pattern NAME = Pattern.compile("[a-zA-Z_:][a-zA-Z0-9_:]*");
    private static final Pattern LABEL = Pattern.compile("[a-zA-Z_][a-zA-Z0-9_]*");
    /** O2: a bound on the series one host keeps. */
    static final int MAX_SERIES = 10_000;

    private final Map<String, Family> families = new LinkedHashMap<>();
    private int series;

    /** A registry view for one model version; {@link #close()} releases all it handed out. */
    public Scope scope(String owner) {
        return new Scope(owner);
    }

    /** What the metrics plugin exports. */
    public synchronized List<MetricFamilySnapshot> snapshot() {
        List<MetricFamilySnapshot> out = new ArrayList<>(families.size());
        for (Family f : families.values()) {
            List<MetricFamilySnapshot.Series> s = new ArrayList<>();
            for (Series m : f.series.values()) {
                s.add(m.snapshot());
            }
            out.add(new MetricFamilySnapshot(f.name, f.description, f.kind, s));
        }
        return out;
    }

    synchronized int familyCount() {
        return families.size();
    }

    private synchronized Family acquire(String name, String description, MetricKind kind) {
        requireNonNull(name, "name is null");
        requireNonNull(description, "description is null");
        requireNonNull(kind, "kind is null");
        if (!NAME.matcher(name).matches()) {
            throw BackplaneException.invalid("metric family name '" + name + "' is invalid: use letters, digits, '_' and ':', not starting with a digit");
        }
        Family f = families.get(name);
        if (f == null) {
            f = new Family(name, description, kind);
            families.put(name, f);
        } else if (f.kind != kind) {
            throw BackplaneException.invalid("metric family '" + name + "' already exists with kind " + f.kind + "; cannot create it again with kind "
                    + kind + " (use another name)");
        }
        f.refs++;
        return f;
    }

    private synchronized void release(Family f) {
        if (--f.refs == 0 && f.series.isEmpty()) {
            families.remove(f.name, f);
        }
    }

    private synchronized Series acquire(Family f, Map<String, String> labels, List<Double> buckets) {
        Map<String, String> key = new TreeMap<>();
        for (Map.Entry<String, String> e : requireNonNull(labels, "labels is null").entrySet()) {
            if (!LABEL.matcher(e.getKey()).matches() || e.getKey().startsWith("__")) {
                throw BackplaneException.invalid("label name '" + e.getKey() + "' of metric family '" + f.name + "' is invalid: use letters, digits"
                        + " and '_', not starting with a digit or '__'");
            }
            key.put(e.getKey(), requireNonNull(e.getValue(), "label value is null"));
        }
        if (f.kind == MetricKind.HISTOGRAM) {
            // no boundaries: only the +Inf bucket, as Triton's TRITONSERVER_MetricArgsSetHistogram with none
            for (int i = 0; i < buckets.size(); i++) {
                double b = buckets.get(i);
                if (Double.isNaN(b) || Double.isInfinite(b) || i > 0 && b <= buckets.get(i - 1)) {
                    throw BackplaneException.invalid("histogram buckets " + buckets + " of metric family '" + f.name
                            + "' must be finite and strictly increasing");
                }
            }
        } else if (!buckets.isEmpty()) {
            throw BackplaneException.invalid("metric family '" + f.name + "' is a " + f.kind + ": buckets are only for HISTOGRAM families");
        }
        Series s = f.series.get(key);
        if (s == null) {
            if (series >= MAX_SERIES) {
                throw new BackplaneException(ErrorCode.RESOURCE_EXHAUSTED, "the host already holds " + series + " custom metric series (the"
                        + " limit); close metrics that are no longer needed");
            }
            s = new Series(f, key, List.copyOf(buckets));
            f.series.put(key, s);
            series++;
        } else if (f.kind == MetricKind.HISTOGRAM && !s.buckets.equals(buckets)) {
            throw BackplaneException.invalid("metric " + f.name + key + " already exists with buckets " + s.buckets + ", not " + buckets);
        }
        s.refs++;
        return s;
    }

    private synchronized void release(Series s) {
        if (--s.refs == 0) {
            s.family.series.remove(s.labels, s);
            series--;
            if (s.family.refs == 0 && s.family.series.isEmpty()) {
                families.remove(s.family.name, s.family);
            }
        }
    }

    private static final class Family {
        final String name;
        final String description;
        final MetricKind kind;
        final Map<Map<String, String>, Series> series = new LinkedHashMap<>();
        int refs;

        Family(String name, String description, MetricKind kind) {
            this.name = name;
            this.description = description;
            this.kind = kind;
        }
    }

    private static final class Series {
        final Family family;
        final Map<String, String> labels;
        final List<Double> buckets;
        final long[] counts;
        double value;
        int refs;

        Series(Family family, Map<String, String> labels, List<Double> buckets) {
            this.family = family;
            this.labels = labels;
            this.buckets = buckets;
            this.counts = new long[buckets.size() + 1];
        }

        synchronized void increment(double d) {
            if (family.kind == MetricKind.HISTOGRAM) {
                throw BackplaneException.invalid("metric family '" + family.name + "' is a HISTOGRAM: use observe(), not increment()");
            }
            if (!Double.isFinite(d)) {
                throw BackplaneException.invalid("cannot increment metric '" + family.name + "' by " + d);
            }
            if (family.kind == MetricKind.COUNTER && d < 0) {
                throw BackplaneException.invalid("metric family '" + family.name + "' is a COUNTER: it cannot be incremented by a negative value ("
                        + d + ")");
            }
            value += d;
        }

        synchronized void set(double v) {
            if (family.kind != MetricKind.GAUGE) {
                throw BackplaneException.invalid("metric family '" + family.name + "' is a " + family.kind + ": only a GAUGE supports set()");
            }
            if (Double.isNaN(v)) {
                throw BackplaneException.invalid("cannot set metric '" + family.name + "' to NaN");
            }
            value = v;
        }

        synchronized void observe(double v) {
            if (family.kind != MetricKind.HISTOGRAM) {
                throw BackplaneException.invalid("metric family '" + family.name + "' is a " + family.kind + ": only a HISTOGRAM supports observe()");
            }
            if (Double.isNaN(v)) {
                throw BackplaneException.invalid("cannot observe NaN in metric '" + family.name + "'");
            }
            value += v;
            int i = 0;
            while (i < buckets.size() && v > buckets.get(i)) {
                i++;
            }
            counts[i]++;
        }

        synchronized double value() {
            return value;
        }

        synchronized MetricFamilySnapshot.Series snapshot() {
            List<Long> cumulative = new ArrayList<>(counts.length);
            long c = 0;
            if (family.kind == MetricKind.HISTOGRAM) {
                for (long n : counts) {
                    c += n;
                    cumulative.add(c);
                }
            }
            return new MetricFamilySnapshot.Series(labels, value, buckets, cumulative);
        }
    }

    /** The registry as one model version sees it ({@link io.backplane.spi.ModelContext#metrics()}). */
    public final class Scope implements MetricRegistry, AutoCloseable {
        private final String owner;
        private final Set<AutoCloseable> handedOut = ConcurrentHashMap.newKeySet();
        private final AtomicBoolean closed = new AtomicBoolean();

        private Scope(String owner) {
            this.owner = owner;
        }

        @Override
        public MetricFamily family(String name, String description, MetricKind kind) {
            if (closed.get()) {
                throw BackplaneException.unavailable(owner + " is unloaded; it can no longer create metric families");
            }
            FamilyRef ref = new FamilyRef(acquire(name, description, kind), this);
            handedOut.add(ref);
            if (closed.get()) {
                ref.close();
            }
            return ref;
        }

        /** Closes every family and metric reference handed out through this scope. */
        @Override
        public void close() {
            if (closed.compareAndSet(false, true)) {
                for (AutoCloseable c : List.copyOf(handedOut)) {
                    try {
                        c.close();
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                }
            }
        }
    }

    private final class FamilyRef implements MetricFamily {
        private final Family family;
        private final Scope scope;
        private final AtomicBoolean closed = new AtomicBoolean();

        FamilyRef(Family family, Scope scope) {
            this.family = family;
            this.scope = scope;
        }

        @Override
        public String name() {
            return family.name;
        }

        @Override
        public String description() {
            return family.description;
        }

        @Override
        public MetricKind kind() {
            return family.kind;
        }

        @Override
        public Metric metric(Map<String, String> labels, List<Double> buckets) {
            if (closed.get()) {
                throw BackplaneException.unavailable("metric family '" + family.name + "' was closed; create it again");
            }
            MetricRef m = new MetricRef(acquire(family, labels, requireNonNull(buckets, "buckets is null")), scope);
            scope.handedOut.add(m);
            return m;
        }

        @Override
        public void close() {
            if (closed.compareAndSet(false, true)) {
                scope.handedOut.remove(this);
                release(family);
            }
        }
    }

    private final class MetricRef implements Metric {
        private final Series series;
        private final Scope scope;
        private final AtomicBoolean closed = new AtomicBoolean();

        MetricRef(Series series, Scope scope) {
            this.series = series;
            this.scope = scope;
        }

        private Series open() {
            if (closed.get()) {
                throw BackplaneException.unavailable("metric " + series.family.name + series.labels + " was closed");
            }
            return series;
        }

        @Override
        public Map<String, String> labels() {
            return series.labels;
        }

        @Override
        public void increment(double delta) {
            open().increment(delta);
        }

        @Override
        public void set(double value) {
            open().set(value);
        }

        @Override
        public void observe(double value) {
            open().observe(value);
        }

        @Override
        public double value() {
            return open().value();
        }

        @Override
        public void close() {
            if (closed.compareAndSet(false, true)) {
                scope.handedOut.remove(this);
                release(series);
            }
        }
    }
}
