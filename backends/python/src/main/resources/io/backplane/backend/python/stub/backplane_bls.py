"""Backplane python stub: BLS calls (pb_utils.InferenceRequest.exec/async_exec) and custom metrics.

Both go to the host over the stub's control socket as small frames; tensors cross in the
instance's shared-memory region: BLS inputs in the stub's chunks (the host copies them out and
acknowledges), BLS outputs in the host's chunks (copied out here, then freed with HOST_FREE).
A BLS call made while the stub executes requests is a child of one of them on the host: when
that request ends, the host cancels the call and it ends here with a CANCELLED error.

Which request is the parent: Triton's API does not say, and several executions may be in flight
on one stub (coroutine executes of a decoupled model), so the stub works it out from where the
call is made. Each execute() runs in a context of its own (contextvars: a thread's code, or an
asyncio task and the tasks it starts) that knows its execution's requests, and the request whose
inputs or response sender that code used last (pb_utils._current_request). The parent is that
request while it is open; else the first open request of the calling execution; else (a thread
the model started, which inherits no context) the first open request of the newest execution in
flight. So a coroutine per request (Triton's asyncio.gather pattern), a loop over the batch, and
one request per execution all get the right parent, whatever else runs on the stub.
"""

import contextvars

import collections
import json
import struct
import threading
import weakref

import numpy as np

import triton_python_backend_utils as pb_utils

# Frames, host -> stub
F_BLS_RESP, F_METRIC_REPLY = 6, 7
# Frames, stub -> host
F_BLS, F_BLS_CANCEL, F_METRIC, F_HOST_FREE = 28, 29, 30, 31

# io.backplane.spi.ErrorCode ordinal -> pb_utils.TritonError code
WIRE_TO_TRITON_ERROR = {0: 3, 1: 2, 2: 4, 3: 4, 4: 7, 5: 4, 6: 5, 7: 3, 8: 1}

OP_FAMILY_NEW, OP_FAMILY_DEL, OP_METRIC_NEW, OP_METRIC_DEL, OP_INCREMENT, OP_SET, OP_OBSERVE, OP_VALUE = range(1, 9)
KIND_COUNTER, KIND_GAUGE, KIND_HISTOGRAM = 0, 1, 2

_u16 = struct.Struct("<H")
_u32 = struct.Struct("<I")
_u64 = struct.Struct("<Q")
_i64 = struct.Struct("<q")
_f64 = struct.Struct("<d")
_in_tail = struct.Struct("<IQQ")


def _w_str(out, s):
    b = s.encode("utf-8")
    out += _u32.pack(len(b))
    out += b


# The weak references to the requests of the execute() whose code runs in this context (set by
# in_execution); None outside of one (initialize, finalize, a thread the model started).
_execution = contextvars.ContextVar("backplane_execution", default=None)


def _first_open(refs):
    for ref in refs:
        req = ref()
        if req is not None and not req._closed:
            return req
    return None


def call_in_execution(refs, fn, *args):
    """Calls fn(*args) (execute) in a copy of the caller's context that knows its execution's requests (refs)."""
    def run():
        _execution.set(refs)
        pb_utils._current_request.set(None)
        return fn(*args)
    return contextvars.copy_context().run(run)


async def in_execution(refs, coro):
    """Awaits a coroutine execute in its task's context, which then knows its execution's requests;
    the tasks it starts (asyncio.gather, create_task) copy that context."""
    _execution.set(refs)
    pb_utils._current_request.set(None)
    return await coro


class _Call:
    """One BLS call: the responses received so far and whether the final one arrived."""
    __slots__ = ("id", "queue", "cond", "done", "on_event")

    def __init__(self, call_id):
        self.id = call_id
        self.queue = collections.deque()
        self.cond = threading.Condition()
        self.done = False
        self.on_event = None  # async_exec: called (on the reader thread) after each event


class Bls:
    def __init__(self, rt, wire_to_numpy, numpy_to_wire, wire_bytes):
        self.rt = rt
        self.wire_to_numpy = wire_to_numpy
        self.numpy_to_wire = numpy_to_wire
        self.wire_bytes = wire_bytes
        self.lock = threading.Lock()
        self.next_id = 1
        self.calls = {}
        self.metric_waits = {}
        self.pending_deletes = collections.deque()
        self.inflight = []  # per execution in flight, weak references to its requests (newest last)

    def _new_id(self):
        with self.lock:
            i = self.next_id
            self.next_id += 1
            return i

    # ------------------------------------------------------------------ BLS

    def begin(self, requests):
        """The stub's execute thread, before execute(requests): returns the weak references that
        ``in_execution`` makes the calling context's execution."""
        refs = [weakref.ref(r) for r in requests]  # weak: a dropped response sender must still be collected
        with self.lock:
            self.inflight = [e for e in self.inflight if _first_open(e) is not None]
            self.inflight.append(refs)
        return refs

    def _parent(self):
        ref = pb_utils._current_request.get()
        req = ref() if ref is not None else None
        if req is not None and not req._closed:
            return req
        mine = _execution.get()
        if mine is not None:
            req = _first_open(mine)
            if req is not None:
                return req
        with self.lock:
            executions = list(self.inflight)
        for e in reversed(executions):
            req = _first_open(e)
            if req is not None:
                return req
        raise pb_utils.TritonModelException(
            "BLS: InferenceRequest.exec() is only possible while the model executes a request that is still open "
            "(in execute() or before its final response); it cannot run in initialize() or finalize()")

    def start(self, request, decoupled):
        parent = self._parent()
        call = _Call(self._new_id())
        blocks = []
        out = bytearray()
        out += _u64.pack(call.id)
        out += _u64.pack(parent._exec_id)
        out += _u16.pack(parent._index)
        out.append(1 if decoupled else 0)
        _w_str(out, str(request._bls_model))
        out += _i64.pack(int(request._model_version))
        _w_str(out, str(request._request_id or ""))
        _w_str(out, pb_utils._sequence_encode(request._correlation_id, request._flags))
        _w_str(out, request._parameters)
        out += _u64.pack(max(0, int(request._timeout or 0)))
        out += _u16.pack(len(request._requested))
        for n in request._requested:
            _w_str(out, n)
        out += _u16.pack(len(request._inputs))
        arena = self.rt.arena
        try:
            for t in request._inputs:
                arr = t.as_numpy()
                if arr.dtype == np.object_:
                    code = self.wire_bytes
                    data = pb_utils.serialize_byte_tensor(arr)
                else:
                    code = getattr(t, "_wire_code", None)
                    if code is None:
                        code = self.numpy_to_wire.get(arr.dtype)
                    if code is None:
                        raise pb_utils.TritonModelException("BLS input '%s': numpy dtype %s is not supported" % (t.name(), arr.dtype))
                    data = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
                n = data.shape[0]
                _w_str(out, t.name())
                out.append(code)
                out.append(arr.ndim)
                out += struct.pack("<%dq" % arr.ndim, *arr.shape)
                if n:
                    c, off, size = arena.alloc(n)
                    arena.chunks[c][0][off:off + n] = data
                    blocks.append((c, off, size))
                    out += _in_tail.pack(c, off, n)
                else:
                    out += _in_tail.pack(0, 0, 0)
        except BaseException:
            arena.release(blocks)
            raise
        token = 0
        if blocks:
            # The host ACKs these input blocks with the same frame that returns a response credit, so
            # take one here: every ACK then gives back exactly what was taken.
            self.rt.credits.acquire()
            with self.rt.ack_lock:
                token = self.rt.next_token
                self.rt.next_token += 1
                self.rt.pending_acks[token] = blocks
        out += _u64.pack(token)
        with self.lock:
            self.calls[call.id] = call
        try:
            self.rt.send_frame(F_BLS, bytes(out))
        except BaseException:
            with self.lock:
                self.calls.pop(call.id, None)
            raise
        return call

    def cancel(self, call):
        if not call.done:
            try:
                self.rt.send_frame(F_BLS_CANCEL, _u64.pack(call.id))
            except OSError:
                pass

    def _decode_response(self, buf, pos):
        kind = buf[pos]
        pos += 1
        if kind == 1:
            code = buf[pos]
            pos += 1
            (n,) = _u32.unpack_from(buf, pos)
            pos += 4
            msg = bytes(buf[pos:pos + n]).decode("utf-8")
            pos += n
            return pb_utils.InferenceResponse(error=pb_utils.TritonError(msg, WIRE_TO_TRITON_ERROR.get(code, 1))), pos
        (count,) = _u16.unpack_from(buf, pos)
        pos += 2
        outs = []
        for _ in range(count):
            (n,) = _u32.unpack_from(buf, pos)
            pos += 4
            name = bytes(buf[pos:pos + n]).decode("utf-8")
            pos += n
            code = buf[pos]
            ndim = buf[pos + 1]
            pos += 2
            shape = struct.unpack_from("<%dq" % ndim, buf, pos)
            pos += 8 * ndim
            chunk, off, nbytes = _in_tail.unpack_from(buf, pos)
            pos += 20
            raw = self.rt.host_slice(chunk, off, nbytes) if nbytes else np.empty([0], dtype=np.uint8)
            if code == self.wire_bytes:
                arr = pb_utils.deserialize_bytes_tensor(raw).reshape(shape)
            else:
                arr = raw.view(self.wire_to_numpy[code]).reshape(shape).copy()
            t = pb_utils.Tensor.__new__(pb_utils.Tensor)
            t._name = name
            t._array = arr
            t._bf16 = code == 10  # BF16 on the wire (io.backplane.spi.DataType ordinal): the bits, as the stub keeps them
            outs.append(t)
        (n,) = _u32.unpack_from(buf, pos)
        pos += 4
        params = bytes(buf[pos:pos + n]).decode("utf-8")
        pos += n
        resp = pb_utils.InferenceResponse(outs)
        resp._parameters = params or "{}"  # the callee's JSON as the host passed it (a model's own are checked)
        return resp, pos

    def on_frame(self, ftype, payload):
        """Reader thread: a BLS response or a metric reply."""
        if ftype == F_METRIC_REPLY:
            (cid,) = _u64.unpack_from(payload, 0)
            with self.lock:
                w = self.metric_waits.get(cid)
            if w is not None:
                w[1] = payload
                w[0].set()
            return
        (cid,) = _u64.unpack_from(payload, 0)
        final = payload[8] == 1
        has = payload[9] == 1
        pos = 10
        resp = None
        if has:
            resp, pos = self._decode_response(payload, pos)
        (token,) = _u64.unpack_from(payload, pos)
        if token:
            self.rt.send_frame(F_HOST_FREE, _u64.pack(token))
        with self.lock:
            call = self.calls.get(cid)
            if final:
                self.calls.pop(cid, None)
        if call is None:
            return
        with call.cond:
            if resp is not None:
                call.queue.append(resp)
            if final:
                call.done = True
            call.cond.notify_all()
        cb = call.on_event
        if cb is not None:
            cb()

    def fail_all(self, message):
        with self.lock:
            calls = list(self.calls.values())
            self.calls.clear()
            waits = list(self.metric_waits.values())
        for call in calls:
            with call.cond:
                call.queue.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(message, pb_utils.TritonError.UNAVAILABLE)))
                call.done = True
                call.cond.notify_all()
            if call.on_event is not None:
                call.on_event()
        for w in waits:
            w[0].set()

    # ---- the three ways to consume a call ----

    @staticmethod
    def next_response(call):
        """Blocks for the next response; None once the call has ended."""
        with call.cond:
            while not call.queue and not call.done:
                call.cond.wait()
            if call.queue:
                return call.queue.popleft()
            return None

    def single(self, call, model):
        first = None
        while True:
            r = self.next_response(call)
            if r is None:
                break
            if first is None:
                first = r
        if first is None:
            return pb_utils.InferenceResponse(error=pb_utils.TritonError(
                "BLS: model '%s' ended the request without a response; use exec(decoupled=True) for a decoupled model" % model,
                pb_utils.TritonError.INTERNAL))
        return first

    def async_single(self, call, model):
        import asyncio
        loop = asyncio.get_running_loop()
        fut = loop.create_future()

        def check():
            if not fut.done() and call.done:
                fut.set_result(self.single(call, model))

        def on_event():
            try:
                loop.call_soon_threadsafe(check)
            except RuntimeError:
                pass  # the loop has closed: nobody awaits the call any more

        call.on_event = on_event
        check()
        return fut

    # ------------------------------------------------------------------ metrics

    def metric_call(self, op, body):
        self._flush_deletes()
        cid = self._new_id()
        w = [threading.Event(), None]
        with self.lock:
            self.metric_waits[cid] = w
        try:
            self.rt.send_frame(F_METRIC, _u64.pack(cid) + bytes([op]) + body)
            w[0].wait()
        finally:
            with self.lock:
                self.metric_waits.pop(cid, None)
        reply = w[1]
        if reply is None:
            raise pb_utils.TritonModelException("custom metrics: the host connection was lost")
        if reply[8] != 1:
            (n,) = _u32.unpack_from(reply, 9)
            raise pb_utils.TritonModelException(bytes(reply[13:13 + n]).decode("utf-8"))
        (handle,) = _u64.unpack_from(reply, 9)
        (value,) = _f64.unpack_from(reply, 17)
        return handle, value

    def metric_delete(self, op, handle):
        # From __del__ (any thread, even inside a frame send): queue it; the next metric call sends it.
        self.pending_deletes.append((op, handle))

    def _flush_deletes(self):
        while self.pending_deletes:
            try:
                op, handle = self.pending_deletes.popleft()
            except IndexError:
                return
            self.rt.send_frame(F_METRIC, _u64.pack(0) + bytes([op]) + _u64.pack(handle))


def _bls():
    rt = pb_utils._runtime
    if rt is None or getattr(rt, "bls", None) is None:
        raise pb_utils.TritonModelException("BLS and custom metrics need the Backplane python stub")
    return rt.bls


class ResponseIterator:
    """The responses of exec(decoupled=True), in order; ends after the final one."""

    def __init__(self, call, bls):
        self._call = call
        self._bls = bls

    def __iter__(self):
        return self

    def __next__(self):
        r = self._bls.next_response(self._call)
        if r is None:
            raise StopIteration
        return r

    def cancel(self):
        self._bls.cancel(self._call)


class AsyncResponseIterator(ResponseIterator):
    """What async_exec(decoupled=True) returns. As in Triton, ``await`` on it gives the response
    iterator once the first response (or the end) has arrived: ``for r in await req.async_exec(decoupled=True)``.
    It is also an async iterator, so ``async for r in req.async_exec(decoupled=True)`` (with or without
    the ``await``) waits for each response without blocking the event loop."""

    def __init__(self, call, bls):
        import asyncio
        super().__init__(call, bls)
        self._loop = asyncio.get_running_loop()
        self._waiters = []
        call.on_event = self._on_event

    def _on_event(self):  # the reader thread
        try:
            self._loop.call_soon_threadsafe(self._wake)
        except RuntimeError:
            pass  # the loop has closed: nobody awaits the call any more

    def _wake(self):  # the event loop
        waiters, self._waiters = self._waiters, []
        for f in waiters:
            if not f.done():
                f.set_result(None)

    async def _changed(self):
        # Registered before the loop runs anything else, so a wake-up posted after the caller's
        # look at the queue still finds this waiter.
        f = self._loop.create_future()
        self._waiters.append(f)
        await f

    def __await__(self):
        return self._first().__await__()

    async def _first(self):
        call = self._call
        while True:
            with call.cond:
                if call.queue or call.done:
                    return self
            await self._changed()

    def __aiter__(self):
        return self

    async def __anext__(self):
        call = self._call
        while True:
            with call.cond:
                if call.queue:
                    return call.queue.popleft()
                if call.done:
                    raise StopAsyncIteration
            await self._changed()


def request_exec(request, decoupled=False):
    bls = _bls()
    call = bls.start(request, decoupled)
    if decoupled:
        return ResponseIterator(call, bls)
    return bls.single(call, request._bls_model)


def request_async_exec(request, decoupled=False):
    bls = _bls()
    call = bls.start(request, decoupled)
    if decoupled:
        return AsyncResponseIterator(call, bls)
    return bls.async_single(call, request._bls_model)


# Triton's text for an operation on a Metric whose MetricFamily was deleted first (Metric::CheckIfCleared).
_FAMILY_DELETED = ("Invalid metric operation as the corresponding 'MetricFamily' has been deleted. The 'MetricFamily' object "
                   "should be deleted AFTER its corresponding 'Metric' objects have been deleted.")


def _failed(prefix, e):
    return pb_utils.TritonModelException("%s: %s" % (prefix, e))


class MetricFamily:
    """A custom metric family, exported on the host's /metrics (Triton's pb_utils.MetricFamily).

    As in Triton, the family owns the metrics created through it: deleting it (its last Python
    reference) deletes them too, and operations on them then raise TritonModelException.
    """
    COUNTER = KIND_COUNTER
    GAUGE = KIND_GAUGE
    HISTOGRAM = KIND_HISTOGRAM

    def __init__(self, name, description, kind):
        self._handle = None
        self._metrics = weakref.WeakSet()
        if kind not in (KIND_COUNTER, KIND_GAUGE, KIND_HISTOGRAM):
            raise pb_utils.TritonModelException("MetricFamily kind %r is unknown; use pb_utils.MetricFamily.COUNTER, GAUGE or HISTOGRAM"
                                                % (kind,))
        body = bytearray()
        _w_str(body, str(name))
        _w_str(body, str(description))
        body.append(kind)
        try:
            self._handle, _ = _bls().metric_call(OP_FAMILY_NEW, bytes(body))
        except pb_utils.TritonModelException as e:
            raise _failed("Error when creating MetricFamily", e) from None
        self._name = str(name)
        self._kind = kind

    def Metric(self, labels=None, buckets=None):
        """A labelled series. Triton's rules: labels a dict (or None); buckets a list, required for a
        HISTOGRAM (``[]``: only the +Inf bucket) and refused for a COUNTER or GAUGE."""
        if labels is not None and not isinstance(labels, dict):
            raise pb_utils.TritonModelException("Failed to create metric. Labels must be a dictionary.")
        if buckets is not None:
            if not isinstance(buckets, list):
                raise pb_utils.TritonModelException("Failed to create metric. Buckets must be a list.")
            if self._kind != KIND_HISTOGRAM:
                raise pb_utils.TritonModelException("Failed to create metric. Unexpected buckets found.")
        elif self._kind == KIND_HISTOGRAM:
            raise pb_utils.TritonModelException("Failed to create metric. Missing required buckets.")
        m = Metric(self, labels, buckets)
        self._metrics.add(m)
        return m

    def __del__(self):
        metrics = getattr(self, "_metrics", None)
        if metrics is not None:
            for m in list(metrics):
                m._clear()
        h = getattr(self, "_handle", None)
        if h is not None:
            try:
                _bls().metric_delete(OP_FAMILY_DEL, h)
            except Exception:
                pass


class Metric:
    """One labelled series of a MetricFamily (create it with ``family.Metric(...)``)."""

    def __init__(self, family, labels=None, buckets=None):
        self._handle = None
        self._cleared = False
        if labels is None:
            labels = {}
        if not isinstance(labels, dict):
            raise pb_utils.TritonModelException("Failed to create metric. Labels must be a dictionary.")
        self._kind = family._kind  # no reference to the family: deleting it must delete this metric (Triton)
        body = bytearray(_u64.pack(family._handle))
        _w_str(body, json.dumps({str(k): str(v) for k, v in labels.items()}))
        buckets = list(buckets or [])
        body += _u16.pack(len(buckets))
        for b in buckets:
            body += _f64.pack(float(b))
        try:
            self._handle, _ = _bls().metric_call(OP_METRIC_NEW, bytes(body))
        except pb_utils.TritonModelException as e:
            raise _failed("Error when creating Metric", e) from None

    def _call(self, prefix, op, body):
        if self._cleared:
            raise _failed(prefix, _FAMILY_DELETED)
        try:
            return _bls().metric_call(op, _u64.pack(self._handle) + body)[1]
        except pb_utils.TritonModelException as e:
            raise _failed(prefix, e) from None

    def increment(self, value):
        self._call("Failed to increment metric value", OP_INCREMENT, _f64.pack(float(value)))

    def set(self, value):
        self._call("Failed to set metric value", OP_SET, _f64.pack(float(value)))

    def observe(self, value):
        self._call("Failed to observe metric value", OP_OBSERVE, _f64.pack(float(value)))

    def value(self):
        if self._kind == KIND_HISTOGRAM and not self._cleared:
            # Triton's core has no value for a histogram (TRITONSERVER_MetricValue)
            raise _failed("Failed to get metric value", "Unsupported TRITONSERVER_MetricKind (Backplane: a HISTOGRAM has no value(); "
                                                        "its _sum, _count and _bucket series are on /metrics)")
        return self._call("Failed to get metric value", OP_VALUE, b"")

    def _clear(self):
        """Its family is being deleted: delete it on the host; later operations raise (Triton's Metric::Clear)."""
        if not self._cleared:
            self._cleared = True
            h, self._handle = self._handle, None
            if h is not None:
                try:
                    _bls().metric_delete(OP_METRIC_DEL, h)
                except Exception:
                    pass

    def __del__(self):
        self._clear()
