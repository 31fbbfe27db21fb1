package io.backplane.core.internal;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import org.junit.jupiter.api.Test;

/** The response cache alone: keys, LRU eviction by bytes, and copies that never alias. */
class ResponseCacheTest {
    private static InferenceRequest request(float... in) {
        return InferenceRequest.builder("m").input(Tensor.ofFloats("IN", new long[] {in.length}, in)).build();
    }

    private static InferenceResponse response(int floats) {
        return InferenceResponse.of(List.of(Tensor.ofFloats("OUT", new long[] {floats}, new float[floats])));
    }

    @Test
    void key_coversModelVersionInputsOutputsAndParameters_sequenceRequestsHaveNone() {
        ResponseCache.Key base = ResponseCache.key("m", 1, request(1, 2));
        assertEquals(base, ResponseCache.key("m", 1, request(1, 2)));
        Set<ResponseCache.Key> others = new HashSet<>();
        others.add(ResponseCache.key("n", 1, request(1, 2)));
        others.add(ResponseCache.key("m", 2, request(1, 2)));
        others.add(ResponseCache.key("m", 1, request(1, 3)));
        others.add(ResponseCache.key("m", 1, InferenceRequest.builder("m").input(Tensor.ofFloats("IN", new long[] {2, 1}, 1, 2)).build()));
        others.add(ResponseCache.key("m", 1, InferenceRequest.builder("m").input(Tensor.ofFloats("IN2", new long[] {2}, 1, 2)).build()));
        others.add(ResponseCache.key("m", 1, InferenceRequest.builder("m").input(Tensor.ofInts("IN", new long[] {2},
                Float.floatToIntBits(1), Float.floatToIntBits(2))).build()));
        others.add(ResponseCache.key("m", 1, request(1, 2).toBuilder().requestOutput("OUT").build()));
        others.add(ResponseCache.key("m", 1, request(1, 2).toBuilder().requestClassification("OUT", 3).build()));
        others.add(ResponseCache.key("m", 1, request(1, 2).toBuilder().parameter("temperature", 0.5).build()));
        assertEquals(9, others.size(), "every change makes its own key");
        assertFalse(others.contains(base));

        assertNull(ResponseCache.key("m", 1, request(1, 2).toBuilder().correlationId("7").build()));
        assertNull(ResponseCache.key("m", 1, request(1, 2).toBuilder().parameter("sequence_id", 7L).build()));
    }

    @Test
    void key_framesEachParameter_aValueContainingSeparatorsOrOfAnotherTypeIsAnotherRequest() {
        ResponseCache.Key two = ResponseCache.key("m", 1, request(1).toBuilder().parameter("a", "1").parameter("b", "2").build());
        ResponseCache.Key one = ResponseCache.key("m", 1, request(1).toBuilder().parameter("a", "1, b=2").build());
        assertNotEquals(two, one, "one parameter whose text looks like two is not the same request");
        assertNotEquals(ResponseCache.key("m", 1, request(1).toBuilder().parameter("n", 1L).build()),
                ResponseCache.key("m", 1, request(1).toBuilder().parameter("n", "1").build()), "an INT64 1 is not the string \"1\"");
        assertNotEquals(ResponseCache.key("m", 1, request(1).toBuilder().requestClassification("a", 1).requestClassification("b", 2).build()),
                ResponseCache.key("m", 1, request(1).toBuilder().requestClassification("a", 12).build()));
    }

    @Test
    void key_ofAnotherLoadOfTheSameVersion_differs_andDropFreesItsEntriesOnly() {
        ResponseCache cache = new ResponseCache(1 << 20);
        long first = cache.newLoad();
        long second = cache.newLoad();
        ResponseCache.Key a = ResponseCache.key("m", 1, first, request(1));
        ResponseCache.Key b = ResponseCache.key("m", 1, second, request(1));
        assertNotEquals(a, b, "a reloaded version must not see its predecessor's answers");
        assertTrue(cache.insert(a, first, response(4)));
        assertTrue(cache.insert(b, second, response(8)));
        long bBytes = cache.usedBytes() - (16 + 64);

        cache.drop(first);

        assertNull(cache.lookup(a));
        assertNotNull(cache.lookup(b));
        assertEquals(1, cache.size());
        assertEquals(bBytes, cache.usedBytes(), "the dropped entry's bytes are given back");
    }

    @Test
    void lookup_handsOutFreshCopies_thatNeitherTheBackendNorTheClientCanChange() {
        ResponseCache cache = new ResponseCache(1 << 20);
        ResponseCache.Key key = ResponseCache.key("m", 1, request(1));
        Tensor sent = Tensor.ofRaw("OUT", io.backplane.spi.DataType.FP32, new long[] {2}, new byte[8]);
        assertTrue(cache.insert(key, InferenceResponse.of(List.of(sent))));
        sent.data().set(ValueLayout.JAVA_BYTE, 0, (byte) 7); // the backend reuses its buffer

        InferenceResponse first = cache.lookup(key);
        assertNotNull(first);
        assertArrayEquals(new float[2], first.output("OUT").toFloatArray());
        first.output("OUT").data().set(ValueLayout.JAVA_FLOAT_UNALIGNED, 0, 42f); // a client writes into what it got
        assertArrayEquals(new float[2], cache.lookup(key).output("OUT").toFloatArray());
    }

    @Test
    void insert_evictsLeastRecentlyUsedToStayWithinBytes_andSkipsWhatCannotFit() {
        InferenceResponse r = response(250); // 1000 bytes of data + 64 of bookkeeping
        ResponseCache cache = new ResponseCache(3 * 1064);
        List<ResponseCache.Key> keys = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            keys.add(ResponseCache.key("m", 1, request(i)));
        }
        cache.insert(keys.get(0), r);
        cache.insert(keys.get(1), r);
        cache.insert(keys.get(2), r);
        assertNotNull(cache.lookup(keys.get(0))); // 0 is now the most recently used; 1 the least
        cache.insert(keys.get(3), r);

        assertEquals(3, cache.size());
        assertEquals(3 * 1064, cache.usedBytes());
        assertNull(cache.lookup(keys.get(1)), "the least recently used entry went");
        assertNotNull(cache.lookup(keys.get(0)));
        assertFalse(cache.insert(ResponseCache.key("m", 1, request(9)), response(1000)), "larger than the cache: not stored");
        assertEquals(3, cache.size());
    }

    @Test
    void concurrentInsertsAndLookups_keepTheByteBound() throws Exception {
        ResponseCache cache = new ResponseCache(10 * 1064);
        int threads = 8;
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> all = new ArrayList<>();
        List<Throwable> errors = java.util.Collections.synchronizedList(new ArrayList<>());
        for (int t = 0; t < threads; t++) {
            all.add(Thread.ofPlatform().start(() -> {
                try {
                    start.await();
                    for (int i = 0; i < 500; i++) {
                        int k = ThreadLocalRandom.current().nextInt(40);
                        ResponseCache.Key key = ResponseCache.key("m", 1, request(k));
                        InferenceResponse hit = cache.lookup(key);
                        if (hit == null) {
                            cache.insert(key, response(250));
                        } else {
                            assertEquals(250, hit.output("OUT").elementCount());
                        }
                        assertTrue(cache.usedBytes() <= 10 * 1064);
                    }
                } catch (Throwable e) {
                    errors.add(e);
                }
            }));
        }
        start.countDown();
        for (Thread t : all) {
            t.join();
        }
        assertEquals(List.of(), errors);
        assertTrue(cache.size() <= 10 && cache.usedBytes() == cache.size() * 1064L, cache.size() + " entries, " + cache.usedBytes() + " bytes");
        assertNotEquals(0, cache.size());
    }
}
