"""Backplane python stub: runs one instance of a Triton python_backend model for a Backplane host.

Protocol (see StubConnection.java for the design): control frames over a Unix socket
(u32 length, u8 type, payload); executions and their results through the instance's
shared-memory region, with sequence words in a control block that both sides spin on briefly
(when the host finds a core free for it) before sleeping on the word's futex (or on the socket,
where either side has no futex).
"""

# First of all, a session of its own: a terminal's Ctrl-C (SIGINT to the foreground process group)
# must reach only the host, which then unloads the model (finalize runs) and stops this stub itself.
# Done before any import, so the window in which a Ctrl-C still reaches the stub is the
# interpreter's own start-up.
import os as _os
import sys as _sys
try:
    _os.setsid()
except OSError:
    pass  # already a session leader
if "--template" in _sys.argv:
    # A warm template (backplane_template.py): every stub is a fork of this process. Its collector
    # stays off, so that no collection touches (and copies, on write) the pages the forks share.
    import gc as _gc
    _gc.disable()

import asyncio
import bisect
import collections
import faulthandler
import gc
import json
import mmap
import os
import queue
import select
import signal
import socket
import struct
import sys
import threading
import time
import traceback
import weakref

import numpy as np

import triton_python_backend_utils as pb_utils
import backplane_bls
import backplane_execute
import backplane_readiness

# Frame types, host -> stub
F_INIT, F_PING, F_WAKE, F_ACK, F_FINALIZE = 1, 2, 3, 4, 5
# Frame types, stub -> host
F_HELLO, F_INIT_OK, F_INIT_ERR, F_PONG, F_WAKE_HOST, F_RESPONSE, F_LOG, F_FINALIZED = 20, 21, 22, 23, 24, 25, 26, 27

# Control block words (int64 each) at the start of host chunk 0.
W_MAGIC, W_TO_STUB_SEQ, W_MSG_CHUNK, W_MSG_OFF, W_MSG_LEN, W_STUB_WAITING = 0, 1, 2, 3, 4, 5
W_REPLY_SEQ, W_REPLY_CHUNK, W_REPLY_OFF, W_REPLY_LEN, W_HOST_WAITING, W_REPLY_EXEC = 6, 7, 8, 9, 10, 11
W_HOST_FUTEX, W_STUB_FUTEX, W_STUB_SPIN_NS = 12, 13, 14
# Stub-written counters (diagnostics and tests): how often the main thread went to sleep for an
# execution, and how often a blocking call of that sleep returned.
W_STUB_SLEEPS, W_STUB_WAKEUPS = 15, 16
WAITING_SOCKET, WAITING_FUTEX = 1, 2
# How much longer than spin_us a side spins after it had to wake the other (HandOff.AFTER_WAKE_SPIN_FACTOR).
AFTER_WAKE_SPIN_FACTOR = 4
MAGIC = 0x42504C4E50594731  # "BPLNPYG1"

# Wire datatype codes: io.backplane.spi.DataType ordinals.
WIRE_TO_NUMPY = [np.bool_, np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64,
                 np.float16, np.uint16, np.float32, np.float64, np.object_]
WIRE_BYTES = 13
WIRE_BF16 = 10
WIRE_DTYPES = [np.dtype(t) for t in WIRE_TO_NUMPY]
NUMPY_TO_WIRE = {np.dtype(t): i for i, t in enumerate(WIRE_TO_NUMPY) if i not in (10, WIRE_BYTES)}

# pb_utils.TritonError code -> wire error code (io.backplane.spi.ErrorCode ordinal)
EC_INVALID, EC_NOT_FOUND, EC_UNAVAILABLE, EC_EXHAUSTED, EC_CANCELLED, EC_DEADLINE, EC_UNSUPPORTED, EC_TOO_LARGE, \
    EC_INTERNAL, EC_UNKNOWN, EC_ALREADY_EXISTS = range(11)
TRITON_TO_WIRE_ERROR = {0: EC_UNKNOWN, 1: EC_INTERNAL, 2: EC_NOT_FOUND, 3: EC_INVALID, 4: EC_UNAVAILABLE,
                        5: EC_UNSUPPORTED, 6: EC_ALREADY_EXISTS, 7: EC_CANCELLED}

ALIGN = 64
# The scratch block: the result of a plain execution and its small outputs are bump-allocated here
# instead of from the arena (no first-fit search, no free list per request for a few floats). It is
# reused from the start once the host has read the result, i.e. when the next execution arrives.
SCRATCH_BYTES = 64 << 10
SHM_DIR = "/dev/shm"

_u32 = struct.Struct("<I")
_u64 = struct.Struct("<Q")
_i64 = struct.Struct("<q")
_frame_head = struct.Struct("<IB")
_u16 = struct.Struct("<H")
_exec_head = struct.Struct("<IQH")
_req_mid = struct.Struct("<IQH")
_in_tail = struct.Struct("<IQQ")
_out_tail = struct.Struct("<IQQ")
_result_head = struct.Struct("<IQH")
SMALL_COPY_BYTES = 4096  # outputs up to this size are copied through bytes (write_tensor)
_shape_structs = [struct.Struct("<%dq" % n) for n in range(9)]


def _shape_struct(ndim):
    """The struct of a shape of ndim int64 dimensions (cached for the common ranks)."""
    return _shape_structs[ndim] if ndim < len(_shape_structs) else struct.Struct("<%dq" % ndim)


class ProtocolError(Exception):
    pass


class Futex:
    """Shared (cross-process) futexes on 32-bit words of the control block, through libc's syscall()."""

    def __init__(self, mm):
        import ctypes
        import platform
        nr = {"x86_64": 202, "aarch64": 98}.get(platform.machine())
        if nr is None or not sys.platform.startswith("linux"):
            raise OSError("no futex on %s/%s" % (sys.platform, platform.machine()))
        fn = ctypes.CDLL(None, use_errno=True).syscall  # CDLL: the GIL is released during the call
        fn.restype = ctypes.c_long
        self._fn = fn
        self._nr = ctypes.c_long(nr)
        self._c_int = ctypes.c_int
        self._anchor = ctypes.c_char.from_buffer(mm)  # keeps the mapping's address valid
        self._base = ctypes.addressof(self._anchor)
        self._all = ctypes.c_int(0x7FFFFFFF)

    def addr(self, word):
        import ctypes
        return ctypes.c_void_p(self._base + 8 * word)  # the low half of a little-endian int64 word

    def wait(self, addr, expected):
        """Sleeps while the word's low 32 bits equal `expected`' low 32 bits (spurious returns allowed)."""
        self._fn(self._nr, addr, 0, self._c_int(expected & 0xFFFFFFFF), None)

    def wake(self, addr):
        self._fn(self._nr, addr, 1, self._all, None)


class Reader:
    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf, pos=0, end=None):
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end

    def _need(self, n):
        if self.pos + n > self.end:
            raise ProtocolError("message truncated at byte %d (needs %d more)" % (self.pos, n))

    def u8(self):
        self._need(1)
        v = self.buf[self.pos]
        self.pos += 1
        return v

    def u16(self):
        self._need(2)
        v = self.buf[self.pos] | (self.buf[self.pos + 1] << 8)
        self.pos += 2
        return v

    def u32(self):
        self._need(4)
        (v,) = _u32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return v

    def u64(self):
        self._need(8)
        (v,) = _u64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return v

    def i64(self):
        self._need(8)
        (v,) = _i64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return v

    def str(self):
        n = self.u32()
        self._need(n)
        s = bytes(self.buf[self.pos:self.pos + n]).decode("utf-8")
        self.pos += n
        return s


def w_str(out, s):
    b = s.encode("utf-8")
    out += _u32.pack(len(b))
    out += b


class Arena:
    """The stub's own shared-memory chunks (outputs and results), first-fit with coalescing."""

    def __init__(self, prefix, limit, initial):
        self.prefix = prefix
        self.limit = limit
        self.initial = initial
        self.lock = threading.Lock()
        self.chunks = []  # (mmap, uint8 view, size)
        self.free = []  # per chunk: sorted list of [offset, size]
        self.total = 0

    def _grow(self, need):
        size = max(self.initial, need, 2 * self.chunks[-1][2] if self.chunks else 0)
        size = (size + 4095) & ~4095
        if self.total + size > self.limit:
            size = ((need + 4095) & ~4095)
            if self.total + size > self.limit:
                raise pb_utils.TritonModelException(self._cannot_grow(
                    self.total + size, "the outputs need %d bytes of shared memory but the instance's limit of %d bytes "
                    "(shm_max_bytes) is reached (%d in use); raise shm_max_bytes" % (need, self.limit, self.total)))
        k = len(self.chunks)
        path = os.path.join(SHM_DIR, "%s-s%d" % (self.prefix, k))
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.ftruncate(fd, size)
                mm = mmap.mmap(fd, size)
            finally:
                os.close(fd)
        except OSError as e:
            try:
                os.unlink(path)
            except OSError:
                pass
            raise pb_utils.TritonModelException(self._cannot_grow(
                self.total + size, "cannot create shared-memory file %s: %s; %s may be full: in a container, give it "
                "more room (docker run --shm-size=1g)" % (path, e, SHM_DIR)))
        self.chunks.append((mm, np.frombuffer(mm, dtype=np.uint8), size))
        self.free.append([[0, size]])
        self.total += size

    def _cannot_grow(self, to_bytes, hint):
        """Triton's sentence for a pool that cannot grow, then what Backplane knows of why and what to do."""
        return ("Failed to increase the shared memory pool size for key '%s' to %d bytes. (Backplane: %s)"
                % (self.prefix, to_bytes, hint))

    def alloc(self, n):
        n = max(ALIGN, (n + ALIGN - 1) & ~(ALIGN - 1))
        with self.lock:
            for _ in range(2):
                for c, fl in enumerate(self.free):
                    for i, blk in enumerate(fl):
                        if blk[1] >= n:
                            off = blk[0]
                            if blk[1] == n:
                                del fl[i]
                            else:
                                blk[0] += n
                                blk[1] -= n
                            return c, off, n
                self._grow(n)
        raise pb_utils.TritonModelException("shared-memory allocation of %d bytes failed" % n)

    def release(self, blocks):
        with self.lock:
            for c, off, n in blocks:
                fl = self.free[c]
                i = bisect.bisect_left(fl, [off, 0])
                fl.insert(i, [off, n])
                if i + 1 < len(fl) and fl[i][0] + fl[i][1] == fl[i + 1][0]:
                    fl[i][1] += fl[i + 1][1]
                    del fl[i + 1]
                if i > 0 and fl[i - 1][0] + fl[i - 1][1] == fl[i][0]:
                    fl[i - 1][1] += fl[i][1]
                    del fl[i]


class Runtime:
    def __init__(self, sock, prefix, gen, spin_ns, shm_max):
        self.sock = sock
        self.prefix = prefix
        self.gen = gen
        self.spin_ns = spin_ns
        # Outgoing frames: any thread queues and tries a non-blocking send; what the socket
        # cannot take now the writer thread sends when it becomes writable. No thread holds a
        # lock across a blocking write, and the reader never waits to write (DESIGN P9).
        self.out = collections.deque()
        self.out_head = None
        self.out_lock = threading.Lock()
        self.out_ready = threading.Event()
        # Response credits (one per decoupled response, returned by the host's ACK): a producer
        # faster than the host waits here instead of filling the socket. The host holds the ACK of
        # a non-final response until the request's client can take more, so a slow client slows
        # the producer too (DESIGN P9). Per stub, not per request: a stalled client can hold all of
        # them until it reads, goes away or its request ends (docs/backends/python.md).
        self.credits = threading.Semaphore(64)
        self.fence_lock = threading.Lock()
        self.wake = threading.Event()
        self.shutdown = False
        self.host_chunks = {}
        self.arena = Arena(prefix, shm_max, 1 << 20)
        self.pending_acks = {}
        self.ack_lock = threading.Lock()
        self.next_token = 1
        self.sync_blocks = []
        self.scratch = None  # (chunk, offset, size) of the scratch block, taken from the arena at start
        self.scratch_used = 0
        self.model = None
        self.model_name = ""
        self.decoupled = False
        self.ctl = None
        self.futex = None
        self.bls = backplane_bls.Bls(self, WIRE_TO_NUMPY, NUMPY_TO_WIRE, WIRE_BYTES)
        self.readiness = backplane_readiness.Readiness(self)
        self.loop = backplane_execute.EventLoop(self.log)
        self.dropped_senders = queue.SimpleQueue()
        self.left_open = False

    # ---- socket ----
    def send_frame(self, ftype, payload=b""):
        """Queues a frame and sends what the socket takes now; never blocks."""
        self.out.append(_frame_head.pack(len(payload) + 1, ftype) + payload)
        if not self.flush():
            self.out_ready.set()

    def flush(self):
        """Sends queued frames without blocking; False when the socket is full."""
        while self.out or self.out_head is not None:
            if not self.out_lock.acquire(False):
                return True  # the holder looks at the queue again after releasing
            try:
                full = self._drain()
            finally:
                self.out_lock.release()
            if full:
                return False
        return True

    def _drain(self):
        while True:
            buf = self.out_head
            if buf is None:
                if not self.out:
                    return False
                if len(self.out) == 1:
                    buf = memoryview(self.out.popleft())
                else:  # every frame queued so far in one send
                    parts = []
                    while self.out and len(parts) < 256:
                        parts.append(self.out.popleft())
                    buf = memoryview(b"".join(parts))
            try:
                n = self.sock.send(buf)
            except (BlockingIOError, InterruptedError):
                n = 0
            if n < len(buf):
                self.out_head = buf[n:]
                return True
            self.out_head = None

    def flush_before_exit(self, seconds=5.0):
        """Sends what is queued (the last frames before the process exits), for at most `seconds`."""
        deadline = time.monotonic() + seconds
        try:
            while not self.flush():
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                select.select([], [self.sock], [], left)
        except OSError:
            pass

    def writer_loop(self):
        try:
            while True:
                self.out_ready.wait()
                self.out_ready.clear()
                while not self.flush():
                    select.select([], [self.sock], [])
        except OSError:
            os._exit(3)  # the connection is gone: the host is gone or gave up on us

    def log(self, level, message):
        try:
            self.send_frame(F_LOG, bytes([level & 0xFF]) + message.encode("utf-8", "replace"))
        except OSError:
            sys.stderr.write(message + "\n")

    def fence(self):
        # A lock-prefixed atomic (x86) orders the store before it against the load after it.
        self.fence_lock.acquire()
        self.fence_lock.release()

    # ---- shared memory ----
    def host_chunk(self, k):
        v = self.host_chunks.get(k)
        if v is None:
            if k < 0 or k > 4096:
                raise ProtocolError("host chunk index %d out of range" % k)
            path = os.path.join(SHM_DIR, "%s-h%d" % (self.prefix, k))
            fd = os.open(path, os.O_RDWR)
            try:
                size = os.fstat(fd).st_size
                mm = mmap.mmap(fd, size)
            finally:
                os.close(fd)
            v = (mm, np.frombuffer(mm, dtype=np.uint8))
            self.host_chunks[k] = v
        return v[1]

    def host_slice(self, k, off, n):
        u8 = self.host_chunk(k)
        if off < 0 or n < 0 or off + n > u8.shape[0]:
            raise ProtocolError("host offset %d+%d outside chunk %d of %d bytes" % (off, n, k, u8.shape[0]))
        return u8[off:off + n]

    # ---- encoding responses ----
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

    def write_error(self, out, code, message):
        out.append(1)
        out.append(code)
        w_str(out, message)

    def send_response(self, req, response, final):
        """Called by InferenceResponseSender.send (any thread); waits for a response credit."""
        self.credits.acquire()
        out = bytearray()
        out += _u32.pack(self.gen)
        out += _u64.pack(req._exec_id)
        out += struct.pack("<HB", req._index, 1 if final else 0)
        blocks = []
        if response is None:
            out.append(0)
        else:
            out.append(1)
            try:
                self.write_response(out, response, blocks)
            except Exception:
                self.arena.release(blocks)
                self.credits.release()
                raise
        token = 0
        if blocks:
            with self.ack_lock:
                token = self.next_token
                self.next_token += 1
                self.pending_acks[token] = blocks
        out += _u64.pack(token)
        self.send_frame(F_RESPONSE, bytes(out))

    # ---- executing ----
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
        host_slice = self.host_slice

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
                    u8 = self.host_chunk(chunk)
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

    def run_execute(self, exec_id, requests):
        """Runs execute() and returns the result message (bytes) plus its blocks."""
        blocks = []
        ret, error = None, None
        self.bls.active = [weakref.ref(r) for r in requests]  # weak: a dropped response sender must still be collected
        try:
            ret = self.model.execute(requests)
            if type(ret) is not list and asyncio.iscoroutine(ret):
                if self.decoupled:
                    self.loop.submit(ret, backplane_execute.finish_in_background(self, requests))
                    ret = None
                else:
                    ret = self.loop.run(ret)
        except BaseException as e:  # SystemExit and KeyboardInterrupt of model code fail the requests, not the stub
            error = e
            self.log(pb_utils.LogLevel.ERROR, "execute() raised for model '%s':\n%s" % (self.model_name, traceback.format_exc()))
        if self.decoupled:
            outcomes = backplane_execute.decoupled_outcomes(self, requests, ret, error)
        elif error is None and self.plain_result(requests, ret):
            return self.write_plain_result(exec_id, requests, ret, blocks)
        else:
            outcomes = backplane_execute.plain_outcomes(self, requests, ret, error)
            self.left_open = any(o[0] == "open" for o in outcomes)
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
                _close_sender(req)
                out.append(1)
                self.write_error(out, EC_INTERNAL, o[1])
            else:
                _close_sender(req)
                out.append(1)
                mark = len(out)
                try:
                    self.write_response(out, o[1], blocks, True)
                except Exception as e:
                    del out[mark:]
                    self.write_error(out, EC_INTERNAL, "response for request '%s' could not be sent: %s: %s"
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
        self.left_open = False
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
                self.write_error(out, EC_INTERNAL, "response for request '%s' could not be sent: %s: %s"
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

    def close_request(self, req, response):
        """The FINAL of a plain model's request, from its response sender (the sender's lock is held)."""
        if req._executing:
            req._final = response  # execute() has not returned: its result carries the response
        else:
            self.send_response(req, response, True)

    def main_loop(self):
        ctl = self.ctl
        last = 0  # a fresh region per generation: the host's first execution is sequence 1
        clock = time.perf_counter_ns
        futex = self.futex
        seq_addr = futex.addr(W_TO_STUB_SEQ) if futex else None
        reply_addr = futex.addr(W_REPLY_SEQ) if futex else None
        woke_host = False
        while not self.shutdown:
            s = ctl[W_TO_STUB_SEQ]
            if s == last:
                # The host decides per execution whether a core is free for this stub to spin on.
                spin_ns = min(self.spin_ns, ctl[W_STUB_SPIN_NS])
                if woke_host:
                    # the host we just woke needs a wake-up's time before it can post the next execution: a
                    # spin as short as usual would end first, and the host would then have to wake us too
                    spin_ns *= AFTER_WAKE_SPIN_FACTOR
                    woke_host = False
                if spin_ns > 0:
                    deadline = clock() + spin_ns
                    i = 0
                    while ctl[W_TO_STUB_SEQ] == last:
                        i += 1
                        if (i & 63) == 0 and clock() > deadline:
                            break
                s = ctl[W_TO_STUB_SEQ]
                if s == last:
                    ctl[W_STUB_SLEEPS] += 1
                    if futex is not None:
                        ctl[W_STUB_WAITING] = WAITING_FUTEX
                        self.fence()
                        while ctl[W_TO_STUB_SEQ] == last and not self.shutdown:
                            futex.wait(seq_addr, last)
                            ctl[W_STUB_WAKEUPS] += 1
                    else:
                        self.wake.clear()
                        ctl[W_STUB_WAITING] = WAITING_SOCKET
                        self.fence()
                        if ctl[W_TO_STUB_SEQ] == last and not self.shutdown:
                            self.wake.wait()
                            ctl[W_STUB_WAKEUPS] += 1
                    ctl[W_STUB_WAITING] = 0
                    continue
            last = s
            # The host has consumed the previous result: its blocks, and the scratch block, are free again.
            if self.sync_blocks:
                self.arena.release(self.sync_blocks)
                self.sync_blocks = []
            self.scratch_used = 0
            chunk, off, n = ctl[W_MSG_CHUNK], ctl[W_MSG_OFF], ctl[W_MSG_LEN]
            msg = self.host_slice(chunk, off, n).tobytes()
            exec_id, requests = self.parse_exec(msg)
            c, roff, rlen, blocks = self.run_execute(exec_id, requests)
            self.sync_blocks = blocks
            ctl[W_REPLY_CHUNK] = c
            ctl[W_REPLY_OFF] = roff
            ctl[W_REPLY_LEN] = rlen
            ctl[W_REPLY_EXEC] = exec_id
            ctl[W_REPLY_SEQ] = s
            self.fence()
            waiting = ctl[W_HOST_WAITING]
            if waiting == WAITING_FUTEX:
                futex.wake(reply_addr)
                woke_host = True
            elif waiting:
                self.send_frame(F_WAKE_HOST)
                woke_host = True
            if self.left_open:
                # Plain requests were left to their response senders: a young-generation collection finds a
                # sender the model already dropped, so its request ends now (see end_dropped_senders).
                self.left_open = False
                requests = None
                gc.collect(0)

    def wake_main_for_shutdown(self):
        """Wakes the main thread from its futex sleep. It may have checked `shutdown` just before this
        thread set it and be entering the sleep only now, so the wake repeats while it still sleeps."""
        addr = self.futex.addr(W_TO_STUB_SEQ)
        for _ in range(5000):
            self.futex.wake(addr)
            if self.ctl[W_STUB_WAITING] != WAITING_FUTEX:
                return
            time.sleep(0.001)

    def reader_loop(self):
        buf = bytearray()
        sock = self.sock
        while True:
            try:
                select.select([sock], [], [])
                data = sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            if not data:
                os._exit(3)  # the host closed the connection: it is gone or gave up on us
            buf += data
            while len(buf) >= 5:
                (n, ftype) = _frame_head.unpack_from(buf, 0)
                if len(buf) < 4 + n:
                    break
                payload = bytes(buf[5:4 + n])
                del buf[:4 + n]
                if ftype == F_WAKE:
                    self.wake.set()
                elif ftype == F_PING:
                    self.send_frame(F_PONG, payload)
                elif ftype == F_ACK:
                    (token,) = _u64.unpack_from(payload, 0)
                    if token:
                        with self.ack_lock:
                            blocks = self.pending_acks.pop(token, None)
                        if blocks:
                            self.arena.release(blocks)
                    self.credits.release()
                elif ftype in (backplane_bls.F_BLS_RESP, backplane_bls.F_METRIC_REPLY):
                    self.bls.on_frame(ftype, payload)
                elif ftype == backplane_readiness.F_READY:
                    self.readiness.on_frame(payload)
                elif ftype == F_FINALIZE:
                    self.shutdown = True
                    self.wake.set()
                    if self.futex is not None:
                        self.wake_main_for_shutdown()


def recv_exactly(sock, n):
    data = b""
    while len(data) < n:
        select.select([sock], [], [])
        try:
            part = sock.recv(n - len(data))
        except (BlockingIOError, InterruptedError):
            continue
        if not part:
            raise ProtocolError("host closed the connection during start-up")
        data += part
    return data


def recv_frame(sock):
    (n, ftype) = _frame_head.unpack(recv_exactly(sock, 5))
    return ftype, recv_exactly(sock, n - 1)


def watch_parent():
    # stdin is a pipe from the host; it reaches EOF when the host process dies (even on kill -9).
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    os._exit(4)


def _close_sender(req):
    """The result carries this request's FINAL: later sends from Python raise."""
    req._closed = True
    sender = req._sender
    if sender is not None:
        with sender._lock:
            sender._closed = True


def load_model(path, version_dir):
    """Imports model.py as the package "model" rooted at its version folder, so that it can import its
    sibling files both ways (``import helper`` and ``from . import helper``), as under Triton."""
    import importlib.util
    if version_dir not in sys.path:
        sys.path.insert(0, version_dir)
    spec = importlib.util.spec_from_file_location("model", path, submodule_search_locations=[version_dir])
    module = importlib.util.module_from_spec(spec)
    sys.modules["model"] = module
    spec.loader.exec_module(module)
    if not hasattr(module, "TritonPythonModel"):
        raise pb_utils.TritonModelException("%s defines no class TritonPythonModel" % path)
    return module.TritonPythonModel


def isolate_process_state():
    """Model code sees the process an embedded interpreter gives it (as under Triton), not the stub's flags."""
    sys.argv = [""]


def auto_complete(opts):
    """Runs TritonPythonModel.auto_complete_config once (its own short-lived process) and writes the result."""
    isolate_process_state()
    with open(opts["--auto-complete"], "r", encoding="utf-8") as f:
        request = json.load(f)
    out_path = opts["--out"]
    try:
        cls = load_model(request["model_file"], request["version_dir"])
        config = pb_utils.ModelConfig(request["config"], request.get("declared_decoupled"))
        if hasattr(cls, "auto_complete_config"):
            result = cls.auto_complete_config(config)
            if not isinstance(result, pb_utils.ModelConfig):
                raise pb_utils.TritonModelException(
                    "auto_complete_config() must return the pb_utils.ModelConfig it was given, it returned %s"
                    % type(result).__name__)
            config = result
        answer = {"config": config.as_dict()}
    except BaseException as e:
        answer = {"error": "%s: %s" % (type(e).__name__, e), "traceback": traceback.format_exc()}
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(answer, f)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main():
    argv = sys.argv[1:]
    opts = dict(zip(argv[0::2], argv[1::2]))
    if "--auto-complete" in opts:
        auto_complete(opts)
    isolate_process_state()
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # kill -USR1 <pid>: dump Python stacks to the host log
    threading.Thread(target=watch_parent, name="backplane-parent-watch", daemon=True).start()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(opts["--socket"])
    sock.setblocking(False)
    gen = int(opts["--gen"])
    token = os.environ.pop("BACKPLANE_STUB_TOKEN", "")
    rt = Runtime(sock, opts["--prefix"], gen, int(opts["--spin-us"]) * 1000, int(opts["--shm-max"]))
    pb_utils._runtime = rt
    threading.Thread(target=rt.writer_loop, name="backplane-stub-writer", daemon=True).start()
    hello = bytearray(struct.pack("<II", gen, os.getpid()))
    w_str(hello, token)
    rt.send_frame(F_HELLO, bytes(hello))
    ftype, payload = recv_frame(sock)
    if ftype != F_INIT:
        raise ProtocolError("expected INIT, got frame type %d" % ftype)
    init = json.loads(payload.decode("utf-8"))
    rt.model_name = init["args"]["model_name"]
    rt.decoupled = bool(init["decoupled"])
    rt.credits = threading.Semaphore(max(1, int(init.get("response_credits", 64))))
    mm0 = rt.host_chunk(0)
    rt.ctl = memoryview(rt.host_chunks[0][0]).cast("q")
    if rt.ctl[W_MAGIC] != MAGIC:
        raise ProtocolError("shared-memory control block has a bad magic number")
    del mm0
    if rt.ctl[W_HOST_FUTEX] == 1:
        try:
            rt.futex = Futex(rt.host_chunks[0][0])
            rt.ctl[W_STUB_FUTEX] = 1
        except (OSError, AttributeError, ImportError, TypeError, ValueError) as e:
            rt.log(pb_utils.LogLevel.VERBOSE, "stub wake-ups use the socket: %s" % e)
    # The reader runs from here on: initialize() may already wait for host replies (custom metrics).
    threading.Thread(target=rt.reader_loop, name="backplane-stub-reader", daemon=True).start()
    try:
        rt.model = load_model(init["model_file"], init["version_dir"])()
        if hasattr(rt.model, "initialize"):
            backplane_execute.call_model(rt.loop, rt.model.initialize, init["args"])
    except BaseException as e:
        tb = traceback.format_exc()
        rt.send_frame(F_INIT_ERR, ("%s: %s\n%s" % (type(e).__name__, e, tb)).encode("utf-8", "replace"))
        rt.flush_before_exit()
        sock.close()
        os._exit(1)
    # What initialize() left is long-lived (the model, its weights, its imports): collected once, then
    # frozen out of the collector's passes, which would otherwise walk it again and again and land in
    # the tail of the latency (CPython's gc.freeze; in a fork of the template this also keeps the shared
    # pages unwritten).
    gc.collect()
    gc.freeze()
    # At most 1/16 of the stub's shared-memory limit (shm_max_bytes), so a small limit keeps its room.
    rt.scratch = rt.arena.alloc(min(SCRATCH_BYTES, max(ALIGN, (rt.arena.limit // 16) & ~(ALIGN - 1))))
    rt.send_frame(F_INIT_OK)
    threading.Thread(target=backplane_execute.end_dropped_senders, args=(rt,), name="backplane-stub-senders",
                     daemon=True).start()
    try:
        rt.main_loop()
    except BaseException:
        rt.log(pb_utils.LogLevel.ERROR, "python stub failed:\n" + traceback.format_exc())
        rt.flush_before_exit()
        sys.stderr.flush()
        os._exit(5)
    try:
        if hasattr(rt.model, "finalize"):
            backplane_execute.call_model(rt.loop, rt.model.finalize)
    except BaseException:
        rt.log(pb_utils.LogLevel.ERROR, "finalize() raised for model '%s':\n%s" % (rt.model_name, traceback.format_exc()))
    try:
        rt.send_frame(F_FINALIZED)
    except OSError:
        pass
    rt.flush_before_exit()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    if "--template" in sys.argv:
        import backplane_template
        backplane_template.serve(main)
    else:
        main()
