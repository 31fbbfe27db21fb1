package io.backplane.backend.python;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.MemoryType;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;

/**
 * The execution messages in shared memory (mirrors {@code backplane_codec.py}): a request's entry of
 * an execution message (its inputs copied into host blocks), the message header, the result
 * header, and a response's outputs read back from the stub's chunks. Stateless.
 *
 * <p>Owns <b>P2</b>'s format half: every message carries the generation and execution id, and a
 * result whose header does not match is a protocol error; and <b>P7</b>'s "every offset read from
 * the peer is bounds-checked" for outputs ({@link SharedRegion#stubSlice}). Which request a
 * decoded response belongs to is {@link ExecutionTable}'s business.
 */
final class ExecutionCodec {
    private static final DataType[] TYPES = DataType.values();

    private ExecutionCodec() {
    }

    /** Writes {@code r}'s entry of an execution message into {@code out}, copying its inputs into host blocks of {@code reg}. */
    static void encodeRequest(SharedRegion reg, StubRequest r, Wire.Out out) {
        ScheduledRequest sr = r.sr;
        var req = sr.request();
        SharedRegion.Block cb = reg.allocate(8);
        r.cancelBlock = cb;
        reg.hostSegment(cb).set(ValueLayout.JAVA_LONG, 0, sr.isCancelled() ? 1L : 0L);
        r.cancelMirrored = sr.isCancelled();
        out.u64(sr.id()).str(req.id()).str(Wire.sequence(req)).str(Wire.json(req.parameters()));
        out.u32(cb.chunk()).u64(cb.offset());
        out.u16(req.requestedOutputs().size());
        for (String n : req.requestedOutputs()) {
            out.str(n);
        }
        out.u16(req.inputs().size());
        for (Tensor t : req.inputs()) {
            if (t.memoryType() == MemoryType.GPU) {
                throw new BackplaneException(ErrorCode.UNSUPPORTED, "input '" + t.name() + "' is in GPU memory; the python backend takes host tensors");
            }
            long n = t.byteSize();
            out.str(t.name()).u8(t.dataType().ordinal()).u8(t.rank());
            for (int i = 0; i < t.rank(); i++) {
                out.u64(t.dim(i));
            }
            if (n > 0) {
                SharedRegion.Block b = reg.allocate(n);
                r.blocks.add(b);
                MemorySegment.copy(t.data(), 0, reg.hostSegment(b), 0, n);
                out.u32(b.chunk()).u64(b.offset()).u64(n);
            } else {
                out.u32(0).u64(0).u64(0);
            }
        }
    }

    /** The whole execution message: its header (generation, execution id, request count) and the requests' entries. */
    static Wire.Out message(int generation, StubExecution e, Wire.Out reqs) {
        Wire.Out msg = new Wire.Out(reqs.size() + 16);
        msg.u32(generation).u64(e.id).u16(e.reqs.size());
        msg.write(reqs.buffer(), 0, reqs.size());
        return msg;
    }

    /**
     * Opens the result of {@code e} that the control block {@code ctl} points at, checks its header
     * against the generation and the execution, and returns the reader positioned at the first
     * request's state.
     */
    static Wire.In openResult(SharedRegion reg, MemorySegment ctl, int generation, StubExecution e) {
        long exec = ctl.get(ValueLayout.JAVA_LONG, Wire.W_REPLY_EXEC);
        if (exec != e.id) {
            throw Wire.protocol("result for execution " + exec + " arrived where " + e.id + " was expected");
        }
        MemorySegment m = reg.stubSlice(ctl.get(ValueLayout.JAVA_LONG, Wire.W_REPLY_CHUNK),
                ctl.get(ValueLayout.JAVA_LONG, Wire.W_REPLY_OFF), ctl.get(ValueLayout.JAVA_LONG, Wire.W_REPLY_LEN));
        Wire.In in = new Wire.In(m);
        long gen = in.u32();
        long id = in.u64();
        int n = in.u16();
        if (gen != generation || id != e.id || n != e.reqs.size()) {
            throw Wire.protocol("result header (generation " + gen + ", execution " + id + ", " + n + " requests) does not match"
                    + " generation " + generation + ", execution " + e.id + ", " + e.reqs.size() + " requests");
        }
        return in;
    }

    /** Reads one response for {@code r}, copying the outputs it asked for out of the stub's chunks. */
    static InferenceResponse decodeResponse(SharedRegion reg, Wire.In in, StubRequest r) {
        int hasError = in.u8();
        if (hasError == 1) {
            ErrorCode code = Wire.errorCode(in.u8());
            String msg = in.str();
            return InferenceResponse.error(new BackplaneException(code, msg));
        }
        if (hasError != 0) {
            throw Wire.protocol("response kind " + hasError + " is unknown");
        }
        int count = in.u16();
        List<String> wanted = r.sr.request().requestedOutputs();
        List<Tensor> outs = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            String name = in.str();
            int code = in.u8();
            int ndim = in.u8();
            if (code >= TYPES.length) {
                throw Wire.protocol("output '" + name + "' has datatype code " + code);
            }
            long[] shape = new long[ndim];
            for (int d = 0; d < ndim; d++) {
                shape[d] = in.u64();
            }
            long chunk = in.u32();
            long off = in.u64();
            long nbytes = in.u64();
            MemorySegment data = reg.stubSlice(chunk, off, nbytes);
            if (!wanted.isEmpty() && !wanted.contains(name)) {
                continue;
            }
            MemorySegment copy = MemorySegment.ofArray(data.toArray(ValueLayout.JAVA_BYTE));
            try {
                outs.add(Tensor.of(name, TYPES[code], shape, copy));
            } catch (BackplaneException ex) {
                throw Wire.protocol("output '" + name + "': " + ex.getMessage());
            }
        }
        return InferenceResponse.of(outs, StubJson.parameters(in.str()));
    }

    /** Reads past one response that matches no live request (its offsets are still checked). */
    static InferenceResponse skipResponse(SharedRegion reg, Wire.In in) {
        int hasError = in.u8();
        if (hasError == 1) {
            in.u8();
            in.str();
            return InferenceResponse.of(List.of());
        }
        int count = in.u16();
        for (int i = 0; i < count; i++) {
            in.str();
            in.u8();
            int ndim = in.u8();
            for (int d = 0; d < ndim; d++) {
                in.u64();
            }
            reg.stubSlice(in.u32(), in.u64(), in.u64());
        }
        in.str();
        return InferenceResponse.of(List.of());
    }
}
