package io.backplane.backend.python;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;

/**
 * The start-up of one stub generation, step by step: its secret token and socket name, its command
 * line and environment, the HELLO it must answer with (its generation and the token), and the
 * reply to INIT ({@code initialize()}'s INIT_OK or INIT_ERR, with the LOG and METRIC frames it may
 * send first), and the error a failed start-up ends with. Stateless; {@link StubConnection#start}
 * runs the steps under the start-up timeout.
 *
 * <p>Owns <b>P1</b>'s handshake: a peer with a wrong generation or token is refused (the timeout
 * around it is the connection's). The socket name and the token are unguessable (SecureRandom).
 */
final class StubHandshake {
    private static final SecureRandom RANDOM = new SecureRandom();

    /** Takes the frames other than LOG that {@code initialize()} may send before its reply (custom metrics). */
    interface FrameSink {
        void onFrame(byte type, MemorySegment payload);
    }

    private StubHandshake() {
    }

    /** A fresh secret the stub must echo in its HELLO (passed in its environment, never on its command line). */
    static String newToken() {
        return HexFormat.of().formatHex(randomBytes(16));
    }

    /** An unguessable socket path for {@code generation} under {@code socketDir}. */
    static Path socketPath(Path socketDir, int generation) {
        return socketDir.resolve("g" + generation + "-" + HexFormat.of().formatHex(randomBytes(6)) + ".sock");
    }

    /**
     * Starts the stub ({@link StubLauncher}: a fork of its warm template, or a spawn of the interpreter); a failure to start
     * the interpreter names it and what to do.
     */
    static Process startProcess(StubSettings settings, Path stubDir, Path socketPath, String regionPrefix, int generation, String token,
            String tag) {
        ProcessBuilder pb = new ProcessBuilder(settings.interpreter(), "-u", "-B", stubDir.resolve("backplane_stub.py").toString(),
                "--socket", socketPath.toString(), "--prefix", regionPrefix, "--gen", Integer.toString(generation),
                "--spin-us", Long.toString(settings.spinMicros()), "--shm-max", Long.toString(settings.shmMaxBytes()));
        Map<String, String> env = pb.environment();
        String pp = env.get("PYTHONPATH");
        env.put("PYTHONPATH", stubDir + (pp == null || pp.isEmpty() ? "" : ":" + pp));
        env.put("PYTHONUNBUFFERED", "1");
        env.put("BACKPLANE_STUB_TOKEN", token);
        try {
            return StubLauncher.start(pb, settings, socketPath.getParent()); // a fork of the warm template, or a spawn
        } catch (IOException e) {
            throw new BackplaneException(ErrorCode.UNAVAILABLE, tag + ": cannot start the python interpreter '"
                    + settings.interpreter() + "': " + e.getMessage() + "; install python3 with numpy or set '"
                    + StubSettings.INTERPRETER + "'", e);
        }
    }

    /** Reads the stub's HELLO and checks its generation and token. */
    static void checkHello(SocketChannel ch, String token, int generation) throws IOException {
        ByteBuffer hello = ControlChannel.readFrame(ch, Wire.F_HELLO);
        long gen = Integer.toUnsignedLong(hello.getInt());
        hello.getInt(); // pid
        int tlen = hello.getInt();
        if (tlen != token.length() || gen != generation) {
            throw Wire.protocol("start-up handshake from an unexpected peer");
        }
        byte[] tb = new byte[tlen];
        hello.get(tb);
        if (!new String(tb, StandardCharsets.US_ASCII).equals(token)) {
            throw Wire.protocol("start-up handshake carried a wrong token");
        }
    }

    /**
     * Waits for {@code initialize()}'s reply to INIT: logs its LOG frames, hands its METRIC frames to
     * {@code metrics}, returns on INIT_OK and throws with the Python error on INIT_ERR.
     */
    static void awaitInit(SocketChannel ch, String tag, StubOutput output, FrameSink metrics) throws IOException {
        ByteBuffer reply = ControlChannel.readFrame(ch, (byte) 0);
        byte type = reply.get();
        while (type == Wire.F_LOG || type == Wire.F_METRIC) { // initialize() may log and create metrics
            if (type == Wire.F_LOG) {
                int level = reply.hasRemaining() ? reply.get() : 0;
                output.log(level, StandardCharsets.UTF_8.decode(reply).toString());
            } else {
                metrics.onFrame(type, MemorySegment.ofBuffer(reply.slice()));
            }
            reply = ControlChannel.readFrame(ch, (byte) 0);
            type = reply.get();
        }
        if (type == Wire.F_INIT_ERR) {
            // The first line is the stub's summary (type, message, file and line); the traceback after
            // it quotes source lines, so it goes to the host's log only.
            String err = StandardCharsets.UTF_8.decode(reply).toString();
            int nl = err.indexOf('\n');
            throw new BackplaneException(ErrorCode.INTERNAL, tag + ": initialize() failed: " + firstLine(err), nl < 0 ? null
                    : err.substring(nl + 1), null);
        }
        if (type != Wire.F_INIT_OK) {
            throw Wire.protocol("expected INIT_OK, got frame type " + type);
        }
    }

    /**
     * The error a failed start-up ends with: the timeout, initialize()'s own error or an error that
     * names its cause as it is, else what failed with the stub's exit code (waited for briefly) and
     * the last lines of its stderr.
     */
    static BackplaneException startFailure(Exception e, boolean timedOut, @Nullable Process process, StubSettings settings, String tag,
            StubOutput output) {
        if (timedOut) {
            return new BackplaneException(ErrorCode.UNAVAILABLE, tag + ": the python stub did not finish start-up and initialize() within "
                    + settings.startupTimeoutMillis() + " ms ('" + StubSettings.STARTUP_TIMEOUT + "')" + output.stderrSuffix(),
                    output.stderrDetail(), e);
        }
        if (e instanceof BackplaneException be && be.code() != ErrorCode.INTERNAL || e instanceof BackplaneException be2
                && be2.getMessage().contains("initialize() failed")) {
            return (BackplaneException) e;
        }
        Process p = process;
        String exit = "";
        if (p != null) {
            try {
                if (p.waitFor(2, TimeUnit.SECONDS)) {
                    exit = " (the stub " + ExitStatus.describe(p) + ")";
                }
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
            }
        }
        output.joinPumps();
        return new BackplaneException(ErrorCode.UNAVAILABLE, tag + ": the python stub failed during start-up" + exit + ": "
                + (e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage()) + output.stderrSuffix(), output.stderrDetail(), e);
    }

    private static String firstLine(String s) {
        int i = s.indexOf('\n');
        return i < 0 ? s : s.substring(0, i);
    }

    private static byte[] randomBytes(int n) {
        byte[] b = new byte[n];
        RANDOM.nextBytes(b);
        return b;
    }
}
