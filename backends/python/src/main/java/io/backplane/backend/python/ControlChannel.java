package io.backplane.backend.python;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.SocketChannel;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The control socket of one stub generation and its frame format ({@code u32 length, u8 type,
 * payload}, little-endian; the layout is {@link Wire}'s and {@code backplane_wire.py}'s;
 * {@code backplane_channel.py} is the stub's side).
 *
 * <p>Owns <b>P9</b>'s first half: after start-up only the writer thread writes, so no caller blocks
 * on the socket and no lock is held across a write; {@link #trySend} only queues. Frames read are
 * length-checked against {@link Wire#MAX_FRAME} (<b>P7</b>: nothing read from the peer is trusted).
 * It knows nothing of executions, requests or liveness: callers decide what a frame means.
 */
final class ControlChannel {
    /** The connection's log category, kept from before the split so that logging configuration still applies. */
    static final Logger log = LoggerFactory.getLogger("io.backplane.backend.python.StubConnection");

    private final String tag;
    private final AtomicBoolean dead;
    private final LinkedBlockingQueue<ByteBuffer> outbox = new LinkedBlockingQueue<>();
    private @Nullable SocketChannel channel;
    private @Nullable Thread writer;

    /** {@code dead} is the connection's flag: once set, nothing more is queued and the writer stops. */
    ControlChannel(String tag, AtomicBoolean dead) {
        this.tag = tag;
        this.dead = dead;
    }

    /** The accepted connection (start-up thread, once). */
    void connected(SocketChannel ch) {
        channel = ch;
    }

    @Nullable SocketChannel socket() {
        return channel;
    }

    /** Starts the writer thread; from then on only it writes. */
    void startWriter(String threadName) {
        Thread w = Thread.ofPlatform().daemon().name(threadName).unstarted(this::writeLoop);
        writer = w;
        w.start();
    }

    @Nullable Thread writer() {
        return writer;
    }

    static ByteBuffer readFrame(SocketChannel ch, byte expected) throws IOException {
        ByteBuffer head = ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN);
        readFully(ch, head);
        int n = head.flip().getInt();
        if (n < 1 || n > Wire.MAX_FRAME) {
            throw Wire.protocol("frame length " + n + " out of range");
        }
        ByteBuffer body = ByteBuffer.allocate(n).order(ByteOrder.LITTLE_ENDIAN);
        readFully(ch, body);
        body.flip();
        if (expected != 0) {
            byte type = body.get();
            if (type != expected) {
                throw Wire.protocol("expected frame type " + expected + ", got " + type);
            }
        }
        return body;
    }

    /**
     * The reader's frames, read in bulk: one read takes every frame the stub has sent so far (a
     * wake-up of the reader delivers them all), and each frame is copied into its own buffer, as
     * {@link #readFrame} gives it.
     */
    static final class FrameReader {
        private final ByteBuffer buf = ByteBuffer.allocate(64 << 10).order(ByteOrder.LITTLE_ENDIAN).flip();

        ByteBuffer next(SocketChannel ch) throws IOException {
            fill(ch, 4);
            int n = buf.getInt(buf.position());
            if (n < 1 || n > Wire.MAX_FRAME) {
                throw Wire.protocol("frame length " + n + " out of range");
            }
            ByteBuffer body = ByteBuffer.allocate(n).order(ByteOrder.LITTLE_ENDIAN);
            buf.position(buf.position() + 4);
            int now = Math.min(n, buf.remaining());
            body.put(body.position(), buf, buf.position(), now).position(now);
            buf.position(buf.position() + now);
            readFully(ch, body); // the rest of a frame larger than what was buffered
            return body.flip();
        }

        /** Makes at least {@code need} bytes available, reading as much as the socket has. */
        private void fill(SocketChannel ch, int need) throws IOException {
            if (buf.remaining() >= need) {
                return;
            }
            buf.compact();
            while (buf.position() < need) {
                if (ch.read(buf) < 0) {
                    throw new IOException("the python stub closed its connection");
                }
            }
            buf.flip();
        }
    }

    private static void readFully(SocketChannel ch, ByteBuffer b) throws IOException {
        while (b.hasRemaining()) {
            if (ch.read(b) < 0) {
                throw new IOException("the python stub closed its connection");
            }
        }
    }

    static ByteBuffer frame(byte type, byte[] payload) {
        ByteBuffer b = ByteBuffer.allocate(5 + payload.length).order(ByteOrder.LITTLE_ENDIAN);
        return b.putInt(payload.length + 1).put(type).put(payload).flip();
    }

    /** Start-up only (INIT), before the reader and writer threads exist. */
    void writeDirect(ByteBuffer b) throws IOException {
        SocketChannel ch = channel;
        if (ch == null) {
            throw new IOException("not connected");
        }
        while (b.hasRemaining()) {
            ch.write(b);
        }
    }

    /**
     * Queues a frame for the writer thread, the only thread that writes to the socket after
     * start-up. No caller blocks on the socket and no lock is held across a write: the reader
     * stays free to read (so the stub's sends always drain), and the stub's reader never writes
     * either, so the two directions cannot wait on each other. The queue is bounded in practice:
     * ACKs by the stub's response credits, PINGs by the heartbeat interval, WAKEs by executions.
     */
    private void writeFrame(byte type, byte[] payload) throws IOException {
        if (channel == null || dead.get()) {
            throw new IOException("not connected");
        }
        outbox.add(frame(type, payload));
    }

    private void writeLoop() {
        SocketChannel ch = channel;
        try {
            List<ByteBuffer> batch = new ArrayList<>();
            while (ch != null && !dead.get()) {
                batch.add(outbox.take());
                outbox.drainTo(batch, 255); // every frame queued so far goes out in one gathering write
                ByteBuffer[] bufs = batch.toArray(ByteBuffer[]::new);
                ByteBuffer last = bufs[bufs.length - 1];
                while (last.hasRemaining()) {
                    ch.write(bufs);
                }
                batch.clear();
            }
        } catch (InterruptedException e) {
            // teardown
        } catch (IOException e) {
            log.debug("{}: control connection closed for writing", tag, e);
        } finally {
            outbox.clear();
        }
    }

    /** Queues a frame (any thread, never blocks); a frame for a closed connection is dropped with a debug line. */
    void trySend(byte type, byte[] payload) {
        try {
            writeFrame(type, payload);
        } catch (IOException e) {
            log.debug("{}: cannot send frame {} to the stub", tag, type, e);
        }
    }
}
