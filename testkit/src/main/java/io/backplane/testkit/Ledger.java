package io.backplane.testkit;

import io.backplane.spi.ScheduledRequest;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * What the kit saw of every request from the backend's side, and the violations found so far.
 * Thread-safe: the core's workers, the backend's own threads and the test thread all write here.
 */
final class Ledger {
    static final String TAG_PREFIX = "kit-";

    /** One request as the backend handled it. */
    static final class Rec {
        final long id;
        final String tag;
        final String instance;
        final AtomicInteger finals = new AtomicInteger();
        final AtomicInteger partials = new AtomicInteger();
        volatile boolean sawCancelled;
        volatile boolean executeReturned;
        /** Counted down when the execute that had this request returned: the kit's handshake for L3. */
        final java.util.concurrent.CountDownLatch returned = new java.util.concurrent.CountDownLatch(1);
        volatile boolean sentAfterReturn;
        volatile int batchRequests;

        Rec(long id, String tag, String instance) {
            this.id = id;
            this.tag = tag;
            this.instance = instance;
        }

        String describe() {
            return describe(id, tag);
        }

        static String describe(long id, String tag) {
            return "request #" + id + " (tag " + tag + ")";
        }
    }

    private final Map<Long, Rec> byId = new ConcurrentHashMap<>();
    private final Map<String, Rec> byTag = new ConcurrentHashMap<>();
    private final List<String> violations = new CopyOnWriteArrayList<>();

    static String tagOf(ScheduledRequest r) {
        String id = r.request().id();
        return id.startsWith(TAG_PREFIX) ? id.substring(TAG_PREFIX.length()) : id.isEmpty() ? "none" : "'" + id + "'";
    }

    Rec track(ScheduledRequest r, String instance) {
        Rec rec = byId.computeIfAbsent(r.id(), id -> new Rec(id, tagOf(r), instance));
        byTag.putIfAbsent(rec.tag, rec);
        return rec;
    }

    /** The backend's record of the request with this tag, or null when no instance executed it. */
    Rec byTag(long tag) {
        return byTag.get(Long.toString(tag));
    }

    /** "request #5 (tag 3)" when the backend saw it, else "the request with tag 3". */
    String describeTag(long tag) {
        Rec r = byTag(tag);
        return r != null ? r.describe() : "the request with tag " + tag + " (never reached an instance)";
    }

    void violation(Invariant invariant, String message) {
        violations.add(invariant.label() + " " + message);
    }

    List<String> violations() {
        return List.copyOf(violations);
    }

    List<Rec> records() {
        return List.copyOf(byId.values());
    }
}
