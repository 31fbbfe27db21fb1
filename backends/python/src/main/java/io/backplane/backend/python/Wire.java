package io.backplane.backend.python;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import java.io.ByteArrayOutputStream;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Map;

/** The stub protocol's constants and little-endian encoders/decoders (mirrors backplane_wire.py). */
final class Wire {
    private Wire() {
    }

    // Frames, host -> stub
    static final byte F_INIT = 1;
    static final byte F_PING = 2;
    static final byte F_WAKE = 3;
    static final byte F_ACK = 4;
    static final byte F_FINALIZE = 5;
    static final byte F_BLS_RESP = 6;
    static final byte F_METRIC_REPLY = 7;
    /** Readiness: u64 ask id; the stub runs the model's is_ready() (backplane_readiness.py). */
    static final byte F_READY = 8;

    /**
     * Responses the stub may have sent and not yet seen acknowledged (one ACK per response): a
     * producer faster than the host waits for credit instead of filling the socket.
     */
    static final int RESPONSE_CREDITS = 64;
    // Frames, stub -> host
    static final byte F_HELLO = 20;
    static final byte F_INIT_OK = 21;
    static final byte F_INIT_ERR = 22;
    static final byte F_PONG = 23;
    static final byte F_WAKE_HOST = 24;
    static final byte F_RESPONSE = 25;
    static final byte F_LOG = 26;
    static final byte F_FINALIZED = 27;
    // BLS and custom metrics (BlsBridge), stub -> host
    static final byte F_BLS = 28;
    static final byte F_BLS_CANCEL = 29;
    static final byte F_METRIC = 30;
    static final byte F_HOST_FREE = 31;
    /** u64 ask id, u8 verdict ({@code READY_*}), str detail. */
    static final byte F_READY_REPLY = 32;
    static final int READY_NO = 0, READY_YES = 1, READY_FAILED = 2, READY_ABSENT = 3;

    /** Largest control frame the host accepts from a stub. */
    static final int MAX_FRAME = 64 << 20;

    // Control block words (8 bytes each) at the start of host chunk 0.
    static final long W_MAGIC = 0;
    static final long W_TO_STUB_SEQ = 8;
    static final long W_MSG_CHUNK = 16;
    static final long W_MSG_OFF = 24;
    static final long W_MSG_LEN = 32;
    static final long W_STUB_WAITING = 40;
    static final long W_REPLY_SEQ = 48;
    static final long W_REPLY_CHUNK = 56;
    static final long W_REPLY_OFF = 64;
    static final long W_REPLY_LEN = 72;
    static final long W_HOST_WAITING = 80;
    static final long W_REPLY_EXEC = 88;
    /** 1 when the host can wake a stub through a futex on W_TO_STUB_SEQ (written once, before the stub starts). */
    static final long W_HOST_FUTEX = 96;
    /** 1 when the stub can wake the host through a futex on W_REPLY_SEQ (written once, at the stub's start). */
    static final long W_STUB_FUTEX = 104;
    /** How long the stub may spin for its next execution, in ns (host-written, per execution; 0: sleep at once). */
    static final long W_STUB_SPIN_NS = 112;
    /** Stub-written counter: how often the stub's main thread went to sleep for an execution. */
    static final long W_STUB_SLEEPS = 120;
    /** Stub-written counter: how often a blocking call of that sleep returned. */
    static final long W_STUB_WAKEUPS = 128;
    /** The value of W_STUB_WAITING / W_HOST_WAITING for a side asleep on the futex (1: asleep on the socket). */
    static final long WAITING_FUTEX = 2;
    static final long CONTROL_BYTES = 4096;
    static final long MAGIC = 0x42504C4E50594731L;

    static final ValueLayout.OfInt LE_INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfLong LE_LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfShort LE_SHORT = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    static ErrorCode errorCode(int wire) {
        ErrorCode[] all = ErrorCode.values();
        return wire >= 0 && wire < all.length ? all[wire] : ErrorCode.INTERNAL;
    }

    /** A growable little-endian byte buffer. */
    static final class Out extends ByteArrayOutputStream {
        Out(int size) {
            super(size);
        }

        Out u8(int v) {
            write(v);
            return this;
        }

        Out u16(int v) {
            write(v);
            write(v >>> 8);
            return this;
        }

        Out u32(long v) {
            for (int i = 0; i < 4; i++) {
                write((int) (v >>> (8 * i)));
            }
            return this;
        }

        Out u64(long v) {
            for (int i = 0; i < 8; i++) {
                write((int) (v >>> (8 * i)));
            }
            return this;
        }

        Out str(String s) {
            byte[] b = s.getBytes(StandardCharsets.UTF_8);
            u32(b.length);
            writeBytes(b);
            return this;
        }

        byte[] buffer() {
            return buf;
        }
    }

    /** Reads a peer's message with a bounds check on every field. */
    static final class In {
        private final MemorySegment seg;
        private long pos;

        In(MemorySegment seg) {
            this.seg = seg;
        }

        private void need(long n) {
            if (n < 0 || pos + n > seg.byteSize()) {
                throw protocol("message truncated at byte " + pos + " (needs " + n + " more of " + seg.byteSize() + ")");
            }
        }

        int u8() {
            need(1);
            return seg.get(ValueLayout.JAVA_BYTE, pos++) & 0xFF;
        }

        int u16() {
            need(2);
            int v = seg.get(LE_SHORT, pos) & 0xFFFF;
            pos += 2;
            return v;
        }

        long u32() {
            need(4);
            long v = Integer.toUnsignedLong(seg.get(LE_INT, pos));
            pos += 4;
            return v;
        }

        long u64() {
            need(8);
            long v = seg.get(LE_LONG, pos);
            pos += 8;
            return v;
        }

        String str() {
            long n = u32();
            need(n);
            String s = new String(seg.asSlice(pos, n).toArray(ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8);
            pos += n;
            return s;
        }

        boolean atEnd() {
            return pos == seg.byteSize();
        }
    }

    static BackplaneException protocol(String message) {
        return new BackplaneException(ErrorCode.INTERNAL, "python stub protocol violation: " + message);
    }

    /**
     * A request's sequence fields as one wire string: {@code <flags>:<kind><id>}, kind {@code n}
     * (uint64), {@code s} (string) or nothing (no id). Read by the stub's {@code _sequence_decode}.
     */
    static String sequence(io.backplane.spi.InferenceRequest r) {
        String id = r.correlationId();
        return r.flags() + ":" + (id.isEmpty() ? "" : (r.correlationIdIsNumber() ? "n" : "s") + id);
    }

    /** Applies a wire sequence string ({@link #sequence}) to a request builder. */
    static void sequence(io.backplane.spi.InferenceRequest.Builder b, String field) {
        int colon = field.indexOf(':');
        if (colon < 0) {
            throw protocol("sequence field '" + field + "' has no flags");
        }
        try {
            b.flags(Integer.parseInt(field.substring(0, colon)));
            String rest = field.substring(colon + 1);
            if (rest.startsWith("n")) {
                b.correlationId(Long.parseUnsignedLong(rest.substring(1)));
            } else if (rest.startsWith("s")) {
                b.correlationId(rest.substring(1));
            }
        } catch (NumberFormatException e) {
            throw protocol("sequence field '" + field + "' is malformed");
        }
    }

    /** A minimal JSON writer for the values the stub needs (strings, numbers, booleans, maps, lists). */
    static String json(Object value) {
        StringBuilder sb = new StringBuilder();
        json(sb, value);
        return sb.toString();
    }

    private static void json(StringBuilder sb, Object v) {
        switch (v) {
            case null -> sb.append("null");
            case String s -> quote(sb, s);
            case Boolean b -> sb.append(b);
            case Double d -> sb.append(d.isNaN() || d.isInfinite() ? "null" : d.toString());
            case Number n -> sb.append(n.longValue());
            case Map<?, ?> m -> {
                sb.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : m.entrySet()) {
                    if (!first) {
                        sb.append(',');
                    }
                    first = false;
                    quote(sb, String.valueOf(e.getKey()));
                    sb.append(':');
                    json(sb, e.getValue());
                }
                sb.append('}');
            }
            case Iterable<?> it -> {
                sb.append('[');
                boolean first = true;
                for (Object o : it) {
                    if (!first) {
                        sb.append(',');
                    }
                    first = false;
                    json(sb, o);
                }
                sb.append(']');
            }
            default -> quote(sb, v.toString());
        }
    }

    private static void quote(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                case '\n' -> sb.append("\\n");
                case '\r' -> sb.append("\\r");
                case '\t' -> sb.append("\\t");
                default -> {
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
                }
            }
        }
        sb.append('"');
    }
}
