"""Backplane python stub: the model's own readiness function (Triton's python_backend ``is_ready``).

The host asks with a READY frame (u64 id) whenever a client or operator queries readiness; the stub
answers with a READY_REPLY frame (u64 id, u8 verdict, str detail). ``is_ready`` may be a plain
function or a coroutine function; it runs on this module's own thread (a coroutine on the stub's
event loop), never on the reader or the execute thread, so a slow one delays neither requests nor
heartbeats. One check runs at a time: asks that arrive meanwhile are answered by its result, as
Triton's backend reuses the readiness message in flight. The host bounds the wait (5 s) and takes
no answer, an exception or a value other than a bool as NOT READY.
"""

import asyncio
import queue
import struct
import threading
import traceback

import triton_python_backend_utils as pb_utils

F_READY = 8  # host -> stub
F_READY_REPLY = 32  # stub -> host
READY, NOT_READY, FAILED, ABSENT = 1, 0, 2, 3

_u64 = struct.Struct("<Q")
_u32 = struct.Struct("<I")


class Readiness:
    def __init__(self, rt):
        self.rt = rt
        self.asks = queue.SimpleQueue()
        self.thread = None
        self.lock = threading.Lock()

    def on_frame(self, payload):
        """Reader thread: a READY frame."""
        (ask,) = _u64.unpack_from(payload, 0)
        model = getattr(self.rt, "model", None)
        if model is None:
            self._reply(ask, FAILED, "the model is not loaded yet")
            return
        fn = getattr(model, "is_ready", None)
        if fn is None or not callable(fn):
            self._reply(ask, ABSENT, "")
            return
        self.asks.put(ask)
        with self.lock:
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop, name="backplane-stub-readiness", daemon=True)
                self.thread.start()

    def _loop(self):
        while True:
            asks = [self.asks.get()]
            verdict, detail = self._check()
            while True:  # asks that came while the check ran take its answer
                try:
                    asks.append(self.asks.get_nowait())
                except queue.Empty:
                    break
            for ask in asks:
                self._reply(ask, verdict, detail)

    def _check(self):
        try:
            value = self.rt.model.is_ready()
            if asyncio.iscoroutine(value):
                value = self.rt.loop.run(value)
        except BaseException as e:  # noqa: B902 - whatever the model raises means NOT READY, the stub lives on
            self.rt.log(pb_utils.LogLevel.ERROR, "is_ready() raised for model '%s':\n%s" % (
                self.rt.model_name, "".join(traceback.format_exception(e))))
            return FAILED, "is_ready() raised %s: %s" % (type(e).__name__, e)
        if not isinstance(value, bool):
            return FAILED, "is_ready() returned %s, not a bool" % type(value).__name__
        return (READY if value else NOT_READY), ""

    def _reply(self, ask, verdict, detail):
        b = detail.encode("utf-8", "replace")
        try:
            self.rt.send_frame(F_READY_REPLY, _u64.pack(ask) + bytes([verdict]) + _u32.pack(len(b)) + b)
        except OSError:
            pass  # the host is gone
