package io.backplane.server;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.RequestTrace;
import io.backplane.spi.host.RequestTracer;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.propagation.TextMapGetter;
import io.opentelemetry.exporter.logging.LoggingSpanExporter;
import io.opentelemetry.exporter.otlp.http.trace.OtlpHttpSpanExporter;
import io.opentelemetry.sdk.common.Clock;
import io.opentelemetry.sdk.common.CompletableResultCode;
import io.opentelemetry.sdk.resources.Resource;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.SpanProcessor;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.BatchSpanProcessor;
import io.opentelemetry.sdk.trace.export.SpanExporter;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * Triton's trace extension over OpenTelemetry, for {@code backplane serve}: each sampled request
 * is a span {@code InferRequest} (a child of the client's W3C {@code traceparent} when it sent
 * one) with child spans {@code QUEUE} (acceptance to dispatch) and {@code COMPUTE} (dispatch to
 * end), and each BLS step a child {@code InferRequest} of its parent with its own QUEUE and
 * COMPUTE. The settings are Triton's ({@code trace_level} OFF by default, so nothing is traced
 * until it is turned on; {@code trace_rate} samples one request in N; {@code trace_count} bounds
 * the traces, -1 = no bound), global or per model. Spans go to the configured exporter (OTLP/HTTP
 * or the logging exporter). The SPI and the core know none of this: they see
 * {@link RequestTracer} and {@link RequestTrace}.
 */
final class OtelTracer implements RequestTracer, AutoCloseable {
    static final String LEVEL = "trace_level";
    static final String RATE = "trace_rate";
    static final String COUNT = "trace_count";
    static final String LOG_FREQUENCY = "log_frequency";
    static final String FILE = "trace_file";
    static final String MODE = "trace_mode";
    private static final Set<String> LEVELS = Set.of("OFF", "TIMESTAMPS", "TENSORS");
    private static final AttributeKey<String> MODEL = AttributeKey.stringKey("model_name");
    private static final AttributeKey<Long> VERSION = AttributeKey.longKey("model_version");

    private static final TextMapGetter<String> TRACEPARENT = new TextMapGetter<>() {
        @Override
        @SuppressWarnings("deprecation") // required by the interface in this SDK version
        public Iterable<String> keys(String carrier) {
            return List.of("traceparent");
        }

        @Override
        public @Nullable String get(@Nullable String carrier, String key) {
            return key.equals("traceparent") ? carrier : null;
        }
    };

    /** Settings of one scope (global, or one model's own) and its sampling state. */
    private static final class Scope {
        final Map<String, List<String>> own = new LinkedHashMap<>();
        final AtomicLong arrivals = new AtomicLong();
        final AtomicLong remaining = new AtomicLong(-1);
    }

    private final SdkTracerProvider provider;
    private final Tracer tracer;
    private final Clock clock = Clock.getDefault();
    private final Scope global = new Scope();
    private final Map<String, Scope> models = new ConcurrentHashMap<>();

    OtelTracer(SpanProcessor processor, Map<String, List<String>> initial) {
        this.provider = SdkTracerProvider.builder().addSpanProcessor(processor)
                .setResource(Resource.getDefault().merge(Resource.create(Attributes.of(AttributeKey.stringKey("service.name"), "backplane"))))
                .build();
        this.tracer = provider.get("io.backplane");
        global.own.put(LEVEL, List.of("OFF"));
        global.own.put(RATE, List.of("1000"));
        global.own.put(COUNT, List.of("-1"));
        global.own.put(LOG_FREQUENCY, List.of("0"));
        global.own.put(FILE, List.of(""));
        global.own.put(MODE, List.of("opentelemetry"));
        if (!initial.isEmpty()) {
            update("", new LinkedHashMap<>(initial));
        }
    }

    /**
     * A tracer from {@code --trace-config} values in Triton's syntax: {@code <setting>=<value>}
     * ({@code level}, {@code rate}, {@code count}, {@code log-frequency}, {@code mode}) and
     * {@code opentelemetry,<key>=<value>} ({@code url}: the OTLP/HTTP endpoint, default
     * {@code http://localhost:4318/v1/traces}; {@code exporter}: {@code otlp} or {@code logging}).
     */
    static OtelTracer fromConfig(List<String> config) {
        Map<String, List<String>> settings = new LinkedHashMap<>();
        String url = "http://localhost:4318/v1/traces";
        String exporter = "otlp";
        for (String c : config) {
            String section = "";
            String kv = c;
            int comma = c.indexOf(',');
            if (comma >= 0) {
                section = c.substring(0, comma).trim();
                kv = c.substring(comma + 1);
            }
            int eq = kv.indexOf('=');
            if (eq <= 0) {
                throw BackplaneException.invalid("--trace-config '" + c + "' is not [<mode>,]<setting>=<value>");
            }
            String key = kv.substring(0, eq).trim();
            String value = kv.substring(eq + 1).trim();
            if (section.equals("opentelemetry")) {
                switch (key) {
                    case "url" -> url = value.contains("://") ? value : "http://" + value;
                    case "exporter" -> {
                        if (!value.equals("otlp") && !value.equals("logging")) {
                            throw BackplaneException.invalid("--trace-config opentelemetry,exporter=" + value + ": use otlp or logging");
                        }
                        exporter = value;
                    }
                    case "resource", "bsp_max_queue_size", "bsp_schedule_delay", "bsp_max_export_batch_size" -> {
                        // Triton's batch-processor and resource knobs: the SDK's defaults apply
                    }
                    default -> throw BackplaneException.invalid("--trace-config opentelemetry," + key + ": unknown; use url or exporter");
                }
            } else if (!section.isEmpty()) {
                throw BackplaneException.invalid("--trace-config '" + c + "': mode '" + section + "' is not served; use opentelemetry");
            } else {
                String setting = switch (key) {
                    case "level" -> LEVEL;
                    case "rate" -> RATE;
                    case "count" -> COUNT;
                    case "log-frequency", "log_frequency" -> LOG_FREQUENCY;
                    case "file" -> FILE;
                    case "mode" -> MODE;
                    default -> throw BackplaneException.invalid("--trace-config " + key + ": unknown; use level, rate, count, log-frequency or mode");
                };
                settings.computeIfAbsent(setting, k -> new ArrayList<>()).add(value);
            }
        }
        SpanExporter e;
        if (exporter.equals("logging")) {
            e = LoggingSpanExporter.create();
        } else {
            var otlp = OtlpHttpSpanExporter.builder().setEndpoint(url); // a bad url fails here, at once
            e = new LazyExporter(otlp::build);
        }
        return new OtelTracer(BatchSpanProcessor.builder(e).build(), settings);
    }

    /**
     * An exporter made at its first export: the OTLP/HTTP exporter builds an HTTP client with its TLS
     * context (about 0.1 s of the server's start, on the main thread), and most servers never trace
     * (the level is OFF until a client or {@code --trace-config} turns it on).
     */
    static final class LazyExporter implements SpanExporter {
        private final Supplier<? extends SpanExporter> make;
        private volatile @Nullable SpanExporter made;
        private boolean shutDown;

        LazyExporter(Supplier<? extends SpanExporter> make) {
            this.make = make;
        }

        /** The exporter, made now if it was not yet; null once shut down without having been made. */
        synchronized @Nullable SpanExporter exporter(boolean make) {
            if (made == null && make && !shutDown) {
                made = this.make.get();
            }
            return made;
        }

        /** Whether the exporter was made (tests). */
        boolean made() {
            return made != null;
        }

        @Override
        public CompletableResultCode export(Collection<SpanData> spans) {
            SpanExporter x = exporter(true);
            return x == null ? CompletableResultCode.ofFailure() : x.export(spans);
        }

        @Override
        public CompletableResultCode flush() {
            SpanExporter x = exporter(false);
            return x == null ? CompletableResultCode.ofSuccess() : x.flush();
        }

        @Override
        public CompletableResultCode shutdown() {
            SpanExporter x;
            synchronized (this) {
                shutDown = true;
                x = made;
            }
            return x == null ? CompletableResultCode.ofSuccess() : x.shutdown();
        }
    }

    @Override
    public RequestTrace start(String model, @Nullable String traceParent) {
        Scope s = models.getOrDefault(model, global);
        Map<String, List<String>> eff = settings(model);
        if (eff.get(LEVEL).contains("OFF")) {
            return RequestTrace.NONE;
        }
        long rate = Long.parseLong(eff.get(RATE).getFirst());
        Scope counting = s.own.containsKey(RATE) ? s : global;
        if (counting.arrivals.getAndIncrement() % rate != 0) {
            return RequestTrace.NONE;
        }
        Scope bounded = s.own.containsKey(COUNT) ? s : global;
        if (bounded.remaining.get() >= 0 && bounded.remaining.getAndUpdate(n -> n > 0 ? n - 1 : n) <= 0) {
            return RequestTrace.NONE;
        }
        Context parent = traceParent == null ? Context.root()
                : W3CTraceContextPropagator.getInstance().extract(Context.root(), traceParent, TRACEPARENT);
        Span span = tracer.spanBuilder("InferRequest").setParent(parent).setSpanKind(SpanKind.SERVER).setAttribute(MODEL, model).startSpan();
        return new Trace(span, false);
    }

    /** One traced request: its request span, and the QUEUE and COMPUTE spans the core's timings give. */
    private final class Trace implements RequestTrace {
        private final Span span;
        private final boolean child;
        private final AtomicBoolean ended = new AtomicBoolean();

        Trace(Span span, boolean child) {
            this.span = span;
            this.child = child;
        }

        @Override
        public void timings(String model, long version, long queueNanos, long computeNanos, boolean ok) {
            long end = clock.now();
            long computeStart = end - computeNanos;
            Context parent = Context.root().with(span);
            span.setAttribute(VERSION, version);
            tracer.spanBuilder("QUEUE").setParent(parent).setStartTimestamp(computeStart - queueNanos, TimeUnit.NANOSECONDS)
                    .setAttribute(MODEL, model).setAttribute(VERSION, version).startSpan().end(computeStart, TimeUnit.NANOSECONDS);
            if (computeNanos > 0) {
                tracer.spanBuilder("COMPUTE").setParent(parent).setStartTimestamp(computeStart, TimeUnit.NANOSECONDS)
                        .setAttribute(MODEL, model).setAttribute(VERSION, version).startSpan().end(end, TimeUnit.NANOSECONDS);
            }
            if (child) {
                // A BLS step has no frontend to finish it: it is over when the core ends it.
                if (!ok) {
                    span.setStatus(StatusCode.ERROR);
                }
                end(end);
            }
        }

        @Override
        public RequestTrace child(String model) {
            return new Trace(tracer.spanBuilder("InferRequest").setParent(Context.root().with(span)).setSpanKind(SpanKind.INTERNAL)
                    .setAttribute(MODEL, model).startSpan(), true);
        }

        @Override
        public void finish(@Nullable Throwable error) {
            if (error != null) {
                span.setStatus(StatusCode.ERROR, String.valueOf(error.getMessage()));
            }
            end(clock.now());
        }

        private void end(long at) {
            if (ended.compareAndSet(false, true)) {
                span.end(at, TimeUnit.NANOSECONDS);
            }
        }
    }

    @Override
    public synchronized Map<String, List<String>> settings(String model) {
        Map<String, List<String>> out = new LinkedHashMap<>(global.own);
        Scope s = model.isEmpty() ? null : models.get(model);
        if (s != null) {
            out.putAll(s.own);
        }
        return out;
    }

    @Override
    public synchronized Map<String, List<String>> update(String model, Map<String, @Nullable List<String>> changes) {
        for (Map.Entry<String, @Nullable List<String>> e : changes.entrySet()) {
            check(e.getKey(), e.getValue(), model.isEmpty());
        }
        Scope s = model.isEmpty() ? global : models.computeIfAbsent(model, m -> new Scope());
        for (Map.Entry<String, @Nullable List<String>> e : changes.entrySet()) {
            List<String> v = e.getValue();
            if (v == null) {
                s.own.remove(e.getKey());
                if (e.getKey().equals(COUNT)) {
                    s.remaining.set(-1);
                }
            } else {
                s.own.put(e.getKey(), List.copyOf(v));
                if (e.getKey().equals(COUNT)) {
                    s.remaining.set(Long.parseLong(v.getFirst()));
                }
            }
        }
        if (s != global && s.own.isEmpty()) {
            models.remove(model);
        }
        return settings(model);
    }

    private static void check(String key, @Nullable List<String> v, boolean global) {
        if (v == null) {
            if (global) {
                throw BackplaneException.invalid("trace setting '" + key + "' cannot be cleared globally; give it a value");
            }
            if (!Set.of(LEVEL, RATE, COUNT, LOG_FREQUENCY, FILE).contains(key)) {
                throw BackplaneException.invalid("unknown trace setting '" + key + "'");
            }
            return;
        }
        switch (key) {
            case LEVEL -> {
                if (v.isEmpty()) {
                    throw BackplaneException.invalid("trace setting 'trace_level' needs a value: OFF or TIMESTAMPS");
                }
                for (String l : v) {
                    if (!LEVELS.contains(l)) {
                        throw BackplaneException.invalid("trace setting 'trace_level' = '" + l + "': use OFF or TIMESTAMPS");
                    }
                    if (l.equals("TENSORS")) {
                        throw new BackplaneException(ErrorCode.UNSUPPORTED, "trace setting 'trace_level' = 'TENSORS': tensor tracing is not served; use TIMESTAMPS");
                    }
                }
                if (v.contains("OFF") && v.size() > 1) {
                    throw BackplaneException.invalid("trace setting 'trace_level' = " + v + ": OFF goes alone");
                }
            }
            case RATE -> positive(key, v, 1);
            case COUNT -> positive(key, v, -1);
            case LOG_FREQUENCY -> positive(key, v, 0);
            case FILE -> single(key, v);
            case MODE -> {
                if (!single(key, v).equals("opentelemetry")) {
                    throw BackplaneException.invalid("trace setting 'trace_mode' = '" + v.getFirst() + "': this server traces with opentelemetry only");
                }
            }
            default -> throw BackplaneException.invalid("unknown trace setting '" + key + "'; the settings are trace_level, trace_rate, trace_count, "
                    + "log_frequency, trace_file, trace_mode");
        }
    }

    private static String single(String key, List<String> v) {
        if (v.size() != 1) {
            throw BackplaneException.invalid("trace setting '" + key + "' takes one value, not " + v);
        }
        return v.getFirst();
    }

    private static void positive(String key, List<String> v, long min) {
        String s = single(key, v);
        long n;
        try {
            n = Long.parseLong(s.trim());
        } catch (NumberFormatException e) {
            throw BackplaneException.invalid("trace setting '" + key + "' = '" + s + "' is not an integer");
        }
        if (n < min) {
            throw BackplaneException.invalid("trace setting '" + key + "' = " + n + " is below " + min);
        }
    }

    /** Flushes and stops the exporter. */
    @Override
    public void close() {
        provider.shutdown().join(5, TimeUnit.SECONDS);
    }
}
