"""Backplane python stub: runs one instance of a Triton python_backend model for a Backplane host.

Protocol (see StubConnection.java for the design): control frames over a Unix socket
(backplane_channel); executions and their results through the instance's shared-memory region
(backplane_shm, backplane_codec), with sequence words in a control block that both sides spin on
briefly (when the host finds a core free for it) before sleeping on the word's futex (or on the
socket, where either side has no futex). This module holds the hand-off (Runtime.main_loop), the
frames the reader thread dispatches, and the start-up: handshake, model load, initialize().
Every stub module is imported here, at the top: the template (backplane_template) imports them
once, and its forks run main() without importing them again.
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
import faulthandler
import gc
import json
import os
import queue
import signal
import socket
import struct
import sys
import threading
import time
import traceback

import triton_python_backend_utils as pb_utils
import backplane_bls
import backplane_execute
import backplane_readiness
from backplane_channel import Channel, recv_frame, watch_parent
from backplane_codec import Codec
from backplane_shm import Arena, Futex, HostChunks
from backplane_wire import (AFTER_WAKE_SPIN_FACTOR, F_ACK, F_FINALIZE, F_FINALIZED, F_HELLO, F_INIT, F_INIT_ERR,
                            F_INIT_OK, F_LOG, F_RESPONSE, F_WAKE, F_WAKE_HOST, MAGIC, NUMPY_TO_WIRE, W_HOST_FUTEX,
                            W_HOST_WAITING, W_MAGIC, W_MSG_CHUNK, W_MSG_LEN, W_MSG_OFF, W_REPLY_CHUNK, W_REPLY_EXEC,
                            W_REPLY_LEN, W_REPLY_OFF, W_REPLY_SEQ, W_STUB_FUTEX, W_STUB_SLEEPS, W_STUB_SPIN_NS,
                            W_STUB_WAITING, W_STUB_WAKEUPS, W_TO_STUB_SEQ, WAITING_FUTEX, WAITING_SOCKET, WIRE_BYTES,
                            WIRE_TO_NUMPY, ProtocolError, u64, w_str)


class Runtime:
    """One stub's state, shared by its threads: main (executions), reader, writer, response senders, readiness."""

    def __init__(self, sock, prefix, gen, spin_ns, shm_max):
        self.channel = Channel(sock)
        # bound here: backplane_bls, backplane_readiness and pb_utils send through the runtime
        self.send_frame = self.channel.send_frame
        self.flush_before_exit = self.channel.flush_before_exit
        self.gen = gen
        self.spin_ns = spin_ns
        # Response credits (one per decoupled response, returned by the host's ACK): a producer
        # faster than the host waits here instead of filling the socket. The host holds the ACK of
        # a non-final response until the request's client can take more, so a slow client slows
        # the producer too (DESIGN P9). Per stub, not per request: a stalled client can hold all of
        # them until it reads, goes away or its request ends (docs/backends/python.md).
        self.credits = threading.Semaphore(64)
        self.fence_lock = threading.Lock()
        self.wake = threading.Event()
        self.shutdown = False
        self.host = HostChunks(prefix)
        self.host_slice = self.host.slice
        self.arena = Arena(prefix, shm_max, 1 << 20)
        self.codec = Codec(gen, self.arena, self.host)
        self.pending_acks = {}
        self.ack_lock = threading.Lock()
        self.next_token = 1
        self.sync_blocks = []
        self.model = None
        self.model_name = ""
        self.instance_name = ""
        self.decoupled = False
        self.ctl = None
        self.futex = None
        self.bls = backplane_bls.Bls(self, WIRE_TO_NUMPY, NUMPY_TO_WIRE, WIRE_BYTES)
        self.readiness = backplane_readiness.Readiness(self)
        self.loop = backplane_execute.EventLoop(self.log)
        self.dropped_senders = queue.SimpleQueue()
        self.left_open = False

    def log(self, level, message):
        try:
            self.send_frame(F_LOG, bytes([level & 0xFF]) + message.encode("utf-8", "replace"))
        except OSError:
            sys.stderr.write(message + "\n")

    def fence(self):
        # A lock-prefixed atomic (x86) orders the store before it against the load after it.
        self.fence_lock.acquire()
        self.fence_lock.release()

    def send_response(self, req, response, final):
        """Called by InferenceResponseSender.send (any thread); waits for a response credit."""
        self.credits.acquire()
        blocks = []
        try:
            out = self.codec.response_message(req, response, final, blocks)
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
        out += u64.pack(token)
        self.send_frame(F_RESPONSE, bytes(out))

    # ---- executing ----
    def run_execute(self, exec_id, requests):
        """Runs execute() and returns the result message (bytes) plus its blocks."""
        blocks = []
        ret, error = None, None
        refs = self.bls.begin(requests)
        try:
            ret = backplane_bls.call_in_execution(refs, self.model.execute, requests)
            if type(ret) is not list and asyncio.iscoroutine(ret):
                if self.decoupled:
                    self.loop.submit(backplane_bls.in_execution(refs, ret), backplane_execute.finish_in_background(self, requests))
                    ret = None
                else:
                    ret = self.loop.run(backplane_bls.in_execution(refs, ret))
        except BaseException as e:  # SystemExit and KeyboardInterrupt of model code fail the requests, not the stub
            error = e
            self.log(pb_utils.LogLevel.ERROR, "execute() raised for model '%s':\n%s" % (self.model_name, traceback.format_exc()))
        if self.decoupled:
            outcomes = backplane_execute.decoupled_outcomes(self, requests, ret, error)
        elif error is None and self.codec.plain_result(requests, ret):
            self.left_open = False
            return self.codec.write_plain_result(exec_id, requests, ret, blocks)
        else:
            outcomes = backplane_execute.plain_outcomes(self, requests, ret, error)
            self.left_open = any(o[0] == "open" for o in outcomes)
        return self.codec.write_result(exec_id, requests, outcomes, blocks)

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
        codec = self.codec
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
            codec.scratch_used = 0
            chunk, off, n = ctl[W_MSG_CHUNK], ctl[W_MSG_OFF], ctl[W_MSG_LEN]
            msg = self.host_slice(chunk, off, n).tobytes()
            exec_id, requests = codec.parse_exec(msg)
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

    def on_frame(self, ftype, payload):
        """Reader thread: every frame but PING (the channel answers those)."""
        if ftype == F_WAKE:
            self.wake.set()
        elif ftype == F_ACK:
            (token,) = u64.unpack_from(payload, 0)
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


def error_summary(e, version_dir):
    """One line a client may read: the exception's type and message and where it was raised (file,
    line, function, as pybind11's "At:" lines under Triton), never a source line; the traceback with
    its source lines goes to the host's log only."""
    text = " ".join(("%s: %s" % (type(e).__name__, e)).split())
    if len(text) > 1000:
        text = text[:1000] + "... (%d more characters)" % (len(text) - 1000)
    frames = traceback.extract_tb(e.__traceback__)
    ours = [f for f in frames if f.filename.startswith(version_dir + os.sep)]
    if not ours and not isinstance(e, SyntaxError):  # a SyntaxError's message names its file and line
        ours = frames
    if ours:
        f = ours[-1]
        name = os.path.relpath(f.filename, version_dir) if f.filename.startswith(version_dir + os.sep) else f.filename
        text += " (at %s:%s in %s)" % (name, f.lineno, f.name)
    return text


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
        answer = {"error": error_summary(e, request["version_dir"]), "traceback": traceback.format_exc()}
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
    threading.Thread(target=rt.channel.writer_loop, name="backplane-stub-writer", daemon=True).start()
    hello = bytearray(struct.pack("<II", gen, os.getpid()))
    w_str(hello, token)
    rt.send_frame(F_HELLO, bytes(hello))
    ftype, payload = recv_frame(sock)
    if ftype != F_INIT:
        raise ProtocolError("expected INIT, got frame type %d" % ftype)
    init = json.loads(payload.decode("utf-8"))
    rt.model_name = init["args"]["model_name"]
    rt.instance_name = init["args"].get("model_instance_name", rt.model_name)
    rt.decoupled = bool(init["decoupled"])
    rt.credits = threading.Semaphore(max(1, int(init.get("response_credits", 64))))
    mm0 = rt.host.chunk(0)
    rt.ctl = memoryview(rt.host.maps[0][0]).cast("q")
    if rt.ctl[W_MAGIC] != MAGIC:
        raise ProtocolError("shared-memory control block has a bad magic number")
    del mm0
    if rt.ctl[W_HOST_FUTEX] == 1:
        try:
            rt.futex = Futex(rt.host.maps[0][0])
            rt.ctl[W_STUB_FUTEX] = 1
        except (OSError, AttributeError, ImportError, TypeError, ValueError) as e:
            rt.log(pb_utils.LogLevel.VERBOSE, "stub wake-ups use the socket: %s" % e)
    # The reader runs from here on: initialize() may already wait for host replies (custom metrics).
    threading.Thread(target=rt.channel.reader_loop, args=(rt.on_frame,), name="backplane-stub-reader",
                     daemon=True).start()
    try:
        rt.model = load_model(init["model_file"], init["version_dir"])()
        if hasattr(rt.model, "initialize"):
            backplane_execute.call_model(rt.loop, rt.model.initialize, init["args"])
    except BaseException as e:
        # First line: what a client reads; the rest (the traceback, with source lines): the host's log.
        report = error_summary(e, init["version_dir"]) + "\n" + traceback.format_exc()
        rt.send_frame(F_INIT_ERR, report.encode("utf-8", "replace"))
        rt.flush_before_exit()
        sock.close()
        os._exit(1)
    # What initialize() left is long-lived (the model, its weights, its imports): collected once, then
    # frozen out of the collector's passes, which would otherwise walk it again and again and land in
    # the tail of the latency (CPython's gc.freeze; in a fork of the template this also keeps the shared
    # pages unwritten).
    gc.collect()
    gc.freeze()
    rt.codec.take_scratch()
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

