"""Backplane python stub: the execution messages it reads and the results and responses it writes (ExecutionCodec.java).

Every length, offset and code from the host is checked before use: a bad message is a
ProtocolError, never a read outside the region. Inputs are numpy views of the host's chunk, not
copies; they stay valid because the host frees an execution's blocks only after its result. The
result of a plain execution and its small outputs are bump-allocated in the scratch block instead
of the arena (no first-fit search, no free list per request for a few floats); it is reused from
its start once the host has read the result, i.e. when the next execution arrives. Responses sent
through a response sender (any thread) always take arena blocks, freed by the host's ACK.
"""

import struct

import numpy as np

import triton_python_backend_utils as pb_utils
from backplane_shm import ALIGN
from backplane_wire import (EC_INTERNAL, NUMPY_TO_WIRE, TRITON_TO_WIRE_ERROR, WIRE_BF16, WIRE_BYTES, WIRE_DTYPES,
                            ProtocolError, w_str)
from backplane_wire import exec_head as _exec_head, in_tail as _in_tail, out_tail as _out_tail, \
    req_mid as _req_mid, result_head as _result_head, shape_struct as _shape_struct, u16 as _u16, u32 as _u32, \
    u64 as _u64

SCRATCH_BYTES = 64 << 10
SMALL_COPY_BYTES = 4096  # outputs up to this size are copied through bytes (write_tensor)


def write_error(out, code, message):
    out.append(1)
    out.append(code)
    w_str(out, message)


def close_sender(req):
    """The result carries this request's FINAL: later sends from Python raise."""
    req._closed = True
    sender = req._sender
    if sender is not None:
        with sender._lock:
            sender._closed = True


class Codec:
    def __init__(self, gen, arena, host):
        self.gen = gen
        self.arena = arena
        self.host = host  # backplane_shm.HostChunks
        self.scratch = None  # (chunk, offset, size) of the scratch block, taken from the arena at start
        self.scratch_used = 0

    def take_scratch(self):
        """Takes the scratch block from the arena: at most 1/16 of shm_max_bytes, so a small limit keeps its room."""
        self.scratch = self.arena.alloc(min(SCRATCH_BYTES, max(ALIGN, (self.arena.limit // 16) & ~(ALIGN - 1))))

    # ---- reading executions ----
    def parse_exec(self, msg):
        """Decodes an EXEC message (bytes); every length and offset is checked before use."""
        end = len(msg)
        if end < 14:
            raise ProtocolError("execution message of %d bytes is truncated" % end)
        gen, exec_id, nreq = _exec_head.unpack_from(msg, 0)
        if gen != self.gen:
            raise ProtocolError("execution for generation %d reached generation %d" % (gen, self.gen))
        pos = 14
        requests = []
        new_request = pb_utils.InferenceRequest.__new__
        new_tensor = pb_utils.Tensor.__new__
        Req = pb_utils.InferenceRequest
        Ten = pb_utils.Tensor
        u32 = _u32.unpack_from
        sequence_decode = pb_utils._sequence_decode
        host_slice = self.host.slice
        host_chunk = self.host.chunk

        def string(pos):
            if pos + 4 > end:
                raise ProtocolError("execution message truncated at byte %d" % pos)
            (n,) = u32(msg, pos)
            pos += 4
            if pos + n > end:
                raise ProtocolError("string of %d bytes at byte %d runs past the message" % (n, pos))
            return msg[pos:pos + n].decode("utf-8"), pos + n

        for index in range(nreq):
            pos += 8  # host request id (diagnostics)
            req = new_request(Req)
            req._bls_model = None
            # three strings inline (request id, sequence, parameters): string() costs a call each
            if pos + 4 > end:
                raise ProtocolError("execution message truncated at byte %d" % pos)
            (n,) = u32(msg, pos)
            pos += 4 + n
            if pos + 4 > end:
                raise ProtocolError("execution message truncated at byte %d" % pos)
            req._request_id = msg[pos - n:pos].decode("utf-8") if n else ""
            (n,) = u32(msg, pos)
            pos += 4 + n
            if pos + 4 > end:
                raise ProtocolError("execution message truncated at byte %d" % pos)
            cid = msg[pos - n:pos]
            if cid == b"0:":  # no flags, no correlation id: the common case
                req._flags, req._correlation_id = 0, 0
            else:
                req._flags, req._correlation_id = sequence_decode(cid.decode("utf-8"))
            (n,) = u32(msg, pos)
            pos += 4 + n
            if pos > end:
                raise ProtocolError("execution message truncated at byte %d" % pos)
            params = msg[pos - n:pos]
            req._parameters = "{}" if params == b"{}" else params.decode("utf-8")
            if pos + 14 > end:
                raise ProtocolError("execution message truncated at byte %d" % pos)
            cchunk, coff, nout = _req_mid.unpack_from(msg, pos)
            pos += 14
            req._cancel = host_slice(cchunk, coff, 8)
            requested = []
            for _ in range(nout):
                name, pos = string(pos)
                requested.append(name)
            req._requested = requested
            if pos + 2 > end:
                raise ProtocolError("execution message truncated at byte %d" % pos)
            (nin,) = _u16.unpack_from(msg, pos)
            pos += 2
            inputs = []
            for _ in range(nin):
                name, pos = string(pos)
                if pos + 2 > end:
                    raise ProtocolError("execution message truncated at byte %d" % pos)
                code = msg[pos]
                ndim = msg[pos + 1]
                pos += 2
                if pos + 8 * ndim + 20 > end:
                    raise ProtocolError("execution message truncated at byte %d" % pos)
                shape = _shape_struct(ndim).unpack_from(msg, pos)
                pos += 8 * ndim
                chunk, off, nbytes = _in_tail.unpack_from(msg, pos)
                pos += 20
                if code < WIRE_BYTES:
                    dt = WIRE_DTYPES[code]
                    count = 1
                    for d in shape:
                        count *= d
                    if count * dt.itemsize != nbytes:
                        raise ProtocolError("input '%s' of shape %s has %d bytes" % (name, list(shape), nbytes))
                    u8 = host_chunk(chunk)
                    if off < 0 or off + nbytes > u8.shape[0]:
                        raise ProtocolError("host offset %d+%d outside chunk %d of %d bytes" % (off, nbytes, chunk, u8.shape[0]))
                    arr = np.ndarray(shape, dt, u8, off)  # a view of the host's memory, as u8[off:].view(dt) would be
                elif code == WIRE_BYTES:
                    arr = pb_utils.deserialize_bytes_tensor(host_slice(chunk, off, nbytes)).reshape(shape)
                else:
                    raise ProtocolError("input '%s' has unknown datatype code %d" % (name, code))
                t = new_tensor(Ten)
                t._name = name
                t._array = arr
                t._bf16 = code == WIRE_BF16
                inputs.append(t)
            req._inputs = inputs
            req._sender = None
            req._closed = False
            req._exec_id = exec_id
            req._index = index
            req._executing = True
            req._final = None
            requests.append(req)
        return exec_id, requests

    # ---- writing results and responses ----
    def scratch_alloc(self, n):
        """(chunk, offset) of n bytes in the scratch block, or None when they do not fit."""
        sc = self.scratch
        if sc is None:
            return None
        used = self.scratch_used
        size = max(ALIGN, (n + ALIGN - 1) & ~(ALIGN - 1))
        if used + size > sc[2]:
            return None
        self.scratch_used = used + size
        return sc[0], sc[1] + used

    def write_tensor(self, out, t, blocks, scratch=False):
        arr = t._array
        if t._bf16:
            code = WIRE_BF16
            data = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
        elif arr.dtype == np.object_:
            code = WIRE_BYTES
            data = pb_utils.serialize_byte_tensor(arr)
        else:
            code = NUMPY_TO_WIRE.get(arr.dtype)
            if code is None:
                raise pb_utils.TritonModelException("output '%s': numpy dtype %s is not supported" % (t.name(), arr.dtype))
            if arr.nbytes <= SMALL_COPY_BYTES:
                data = arr.tobytes()  # C order whatever the layout; cheaper than numpy views for a few bytes
            else:
                data = (arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)).reshape(-1).view(np.uint8)
        n = len(data)
        if n:
            where = self.scratch_alloc(n) if scratch else None
            if where is None:
                c, off, size = self.arena.alloc(n)
                blocks.append((c, off, size))
            else:
                c, off = where
            self.arena.chunks[c][0][off:off + n] = data
        else:
            c, off = 0, 0
        w_str(out, t.name())
        out.append(code)
        out.append(arr.ndim)
        out += _shape_struct(arr.ndim).pack(*arr.shape)
        out += _out_tail.pack(c, off, n)

    def write_response(self, out, resp, blocks, scratch=False):
        err = resp.error()
        if err is not None:
            out.append(1)
            out.append(TRITON_TO_WIRE_ERROR.get(err.code(), EC_INTERNAL))
            w_str(out, err.message())
            return
        out.append(0)
        outs = resp.output_tensors()
        out += struct.pack("<H", len(outs))
        for t in outs:
            self.write_tensor(out, t, blocks, scratch)
        w_str(out, resp.parameters() or "{}")

    def response_message(self, req, response, final, blocks):
        """A RESPONSE frame's payload up to its ack token; the outputs take arena blocks, added to blocks."""
        out = bytearray()
        out += _u32.pack(self.gen)
        out += _u64.pack(req._exec_id)
        out += struct.pack("<HB", req._index, 1 if final else 0)
        if response is None:
            out.append(0)
        else:
            out.append(1)
            self.write_response(out, response, blocks)
        return out

    def write_result(self, exec_id, requests, outcomes, blocks):
        """The result message of an execution's outcomes (backplane_execute), placed: (chunk, offset, length, blocks)."""
        out = bytearray()
        out += _u32.pack(self.gen)
        out += _u64.pack(exec_id)
        out += struct.pack("<H", len(requests))
        for req, o in zip(requests, outcomes):
            kind = o[0]
            if kind == "open":
                out.append(0)
            elif kind == "rescheduled":
                out.append(3)
            elif kind == "closed":
                out.append(2)
            elif kind == "error":
                close_sender(req)
                out.append(1)
                write_error(out, EC_INTERNAL, o[1])
            else:
                close_sender(req)
                out.append(1)
                mark = len(out)
                try:
                    self.write_response(out, o[1], blocks, True)
                except Exception as e:
                    del out[mark:]
                    write_error(out, EC_INTERNAL, "response for request '%s' could not be sent: %s: %s"
                                % (req._request_id, type(e).__name__, e))
        return self.place_result(out, blocks)

    @staticmethod
    def plain_result(requests, ret):
        """Whether execute() returned one InferenceResponse per request and touched no response sender:
        the common case, whose outcomes plain_outcomes would only confirm one by one."""
        if type(ret) is not list or len(ret) != len(requests):
            return False
        Resp = pb_utils.InferenceResponse
        for req, resp in zip(requests, ret):
            if req._sender is not None or req._closed or type(resp) is not Resp:
                return False
        return True

    def write_plain_result(self, exec_id, requests, ret, blocks):
        """The result message of a plain_result(): each request closed with its response."""
        out = bytearray(_result_head.pack(self.gen, exec_id, len(requests)))
        for req, resp in zip(requests, ret):
            req._executing = False
            req._closed = True
            out.append(1)
            mark = len(out)
            try:
                self.write_response(out, resp, blocks, True)
            except Exception as e:
                del out[mark:]
                write_error(out, EC_INTERNAL, "response for request '%s' could not be sent: %s: %s"
                            % (req._request_id, type(e).__name__, e))
        return self.place_result(out, blocks)

    def place_result(self, out, blocks):
        """Copies a result message into the scratch block (or arena blocks, added to blocks): (chunk, offset, length, blocks)."""
        n = len(out)
        where = self.scratch_alloc(n)
        if where is None:
            c, off, size = self.arena.alloc(n)
            blocks.append((c, off, size))
        else:
            c, off = where
        self.arena.chunks[c][0][off:off + n] = out
        return c, off, n, blocks
