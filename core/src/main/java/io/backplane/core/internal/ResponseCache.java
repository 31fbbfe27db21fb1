package io.backplane.core.internal;

import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.MemoryType;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;

/**
 * Triton's response cache ({@code --cache-config local,size=<bytes>}): one host-wide LRU map from
 * a request's key to the response its model gave, bounded by the bytes of the cached tensors.
 * Used only by models whose config has {@code response_cache { enable: true }}, never for
 * decoupled models, models with {@code sequence_batching}, or requests that carry a correlation
 * id (their answers depend on state outside the request).
 *
 * <p>The key is a SHA-256 digest of the model name and version, the load it was made by (a
 * reloaded version, whose files may have changed, never sees its predecessor's answers), every
 * input (name, datatype, shape, bytes) in name order, the requested outputs and classifications,
 * and the request parameters (each name, value type and value, length-prefixed). When a loaded
 * version closes its entries are dropped ({@link #drop}). Stored tensors are private heap copies, and every hit hands out fresh copies, so a
 * response in the cache never aliases memory a backend, frontend or client can change.
 *
 * <p>Thread-safe: one lock guards the map; digests and copies are made outside it.
 */
public final class ResponseCache {
    private final long capacityBytes;
    private final LinkedHashMap<Key, Entry> entries = new LinkedHashMap<>(16, 0.75f, true);
    private final AtomicLong loads = new AtomicLong();
    private long usedBytes;

    /** A request's cache key. */
    record Key(String digest) {
    }

    private record Stored(String name, io.backplane.spi.DataType type, long[] shape, byte[] data) {
    }

    private record Entry(List<Stored> outputs, Map<String, Object> parameters, long bytes, long load) {
    }

    /** A cache of at most {@code capacityBytes} bytes of tensor data; 0 turns caching off. */
    public ResponseCache(long capacityBytes) {
        if (capacityBytes < 0) {
            throw new IllegalArgumentException("response cache size " + capacityBytes + " is negative; give a size in bytes ≥ 0");
        }
        this.capacityBytes = capacityBytes;
    }

    public long capacityBytes() {
        return capacityBytes;
    }

    /** Whether {@code config} asks for the cache and may use it: enabled, not decoupled, no sequence batching. */
    static boolean enabledFor(ModelConfig config) {
        return !config.decoupled() && !config.raw().has("sequence_batching")
                && config.section("response_cache").flatMap(n -> n.value("enable")).map(v -> v.equals("true") || v.equals("1")).orElse(false);
    }

    /** A number for one load of a model version, unique in this cache: part of its requests' keys. */
    long newLoad() {
        return loads.incrementAndGet();
    }

    /** The key of {@code request} to a version as loaded the first time, for tests. */
    static @Nullable Key key(String model, long version, InferenceRequest request) {
        return key(model, version, 0, request);
    }

    /**
     * The key of {@code request} to load {@code load} ({@link #newLoad}) of a version, or null when
     * it must not be cached (a sequence request, device memory).
     */
    static @Nullable Key key(String model, long version, long load, InferenceRequest request) {
        if (!request.correlationId().isEmpty() || request.parameters().containsKey("sequence_id")) {
            return null;
        }
        MessageDigest d;
        try {
            d = MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("the JDK has no SHA-256", e);
        }
        text(d, model);
        d.update(ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN).putLong(version).putLong(load).array());
        List<Tensor> inputs = new ArrayList<>(request.inputs());
        inputs.sort(Comparator.comparing(Tensor::name));
        for (Tensor t : inputs) {
            if (t.memoryType() != MemoryType.CPU && t.memoryType() != MemoryType.CPU_PINNED) {
                return null;
            }
            text(d, t.name());
            text(d, t.dataType().name());
            ByteBuffer shape = ByteBuffer.allocate(8 * (t.rank() + 1)).order(ByteOrder.LITTLE_ENDIAN).putLong(t.rank());
            for (long s : t.shape()) {
                shape.putLong(s);
            }
            d.update(shape.array());
            d.update(ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(t.byteSize()).array());
            d.update(t.data().toArray(ValueLayout.JAVA_BYTE));
        }
        text(d, "outputs");
        for (String o : request.requestedOutputs().stream().sorted().toList()) {
            text(d, o);
        }
        text(d, "classifications");
        for (Map.Entry<String, Integer> c : new TreeMap<>(request.classifications()).entrySet()) {
            text(d, c.getKey());
            text(d, c.getValue().toString());
        }
        // Each part framed on its own: {a="1, b=2"} and {a="1", b="2"} (or 1 and "1") are different requests.
        text(d, "parameters");
        for (Map.Entry<String, Object> p : new TreeMap<>(request.parameters()).entrySet()) {
            text(d, p.getKey());
            text(d, p.getValue().getClass().getName());
            text(d, p.getValue().toString());
        }
        return new Key(HexFormat.of().formatHex(d.digest()));
    }

    private static void text(MessageDigest d, String s) {
        byte[] b = s.getBytes(StandardCharsets.UTF_8);
        d.update(ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(b.length).array());
        d.update(b);
    }

    /** A fresh copy of the cached response to {@code key}, or null on a miss. */
    @Nullable InferenceResponse lookup(Key key) {
        Entry e;
        synchronized (entries) {
            e = entries.get(key);
        }
        if (e == null) {
            return null;
        }
        List<Tensor> outputs = new ArrayList<>(e.outputs().size());
        for (Stored s : e.outputs()) {
            outputs.add(Tensor.of(s.name(), s.type(), s.shape().clone(), MemorySegment.ofArray(s.data().clone())));
        }
        return InferenceResponse.of(outputs, e.parameters());
    }

    /**
     * Stores a copy of {@code response} under {@code key}, evicting the least recently used entries
     * to stay within the capacity. A response larger than the whole cache, with an error, or with
     * device tensors is not stored.
     *
     * @return whether it was stored
     */
    boolean insert(Key key, InferenceResponse response) {
        return insert(key, 0, response);
    }

    /** As {@link #insert(Key, InferenceResponse)}, the entry belonging to load {@code load} of its version. */
    boolean insert(Key key, long load, InferenceResponse response) {
        if (response.isError()) {
            return false;
        }
        List<Stored> outputs = new ArrayList<>(response.outputs().size());
        long bytes = 0;
        for (Tensor t : response.outputs()) {
            if (t.memoryType() != MemoryType.CPU && t.memoryType() != MemoryType.CPU_PINNED) {
                return false;
            }
            byte[] data = t.data().toArray(ValueLayout.JAVA_BYTE);
            bytes += data.length + 64L;
            outputs.add(new Stored(t.name(), t.dataType(), t.shape().clone(), data));
        }
        if (bytes > capacityBytes) {
            return false;
        }
        Entry entry = new Entry(List.copyOf(outputs), response.parameters(), bytes, load);
        synchronized (entries) {
            Entry old = entries.put(key, entry);
            usedBytes += bytes - (old == null ? 0 : old.bytes());
            Iterator<Map.Entry<Key, Entry>> lru = entries.entrySet().iterator();
            while (usedBytes > capacityBytes && lru.hasNext()) {
                Map.Entry<Key, Entry> oldest = lru.next();
                if (oldest.getKey().equals(key)) {
                    continue;
                }
                usedBytes -= oldest.getValue().bytes();
                lru.remove();
            }
        }
        return true;
    }

    /** Drops the entries of load {@code load} (its version closed): they can never be hit again. */
    void drop(long load) {
        synchronized (entries) {
            Iterator<Entry> it = entries.values().iterator();
            while (it.hasNext()) {
                Entry e = it.next();
                if (e.load() == load) {
                    usedBytes -= e.bytes();
                    it.remove();
                }
            }
        }
    }

    /** Bytes held now. */
    public long usedBytes() {
        synchronized (entries) {
            return usedBytes;
        }
    }

    /** Entries held now. */
    public int size() {
        synchronized (entries) {
            return entries.size();
        }
    }
}
