"""How the stub runs a model's ``execute`` and turns what it did into one outcome per request.

``execute`` may be a plain function or a coroutine function. Coroutines run on one asyncio event
loop per stub, in its own thread, started on first use: a plain model's coroutine is awaited
before the result goes back (like Triton), a decoupled model's coroutine runs in the background
so that several executions' requests complete concurrently. Nothing model code raises ends the
stub: ``SystemExit`` and ``KeyboardInterrupt`` fail the requests like any other exception.

Per request the outcome is one of:
  ("open",)           the request stays open: a decoupled request, or a plain one whose response
                      sender is in use and will send the FINAL later;
  ("closed",)         its FINAL already went out through the socket;
  ("final", resp)     the result carries its FINAL response (InferenceResponse);
  ("error", message)  the result carries an error FINAL.
"""

import asyncio
import threading
import traceback

import triton_python_backend_utils as pb_utils


class ModelExit(Exception):
    """SystemExit or KeyboardInterrupt raised by model code, carried as an ordinary error."""

    def __init__(self, cause):
        super().__init__("%s: %s" % (type(cause).__name__, cause))
        self.cause = cause


class EventLoop:
    """One asyncio loop in a daemon thread; model coroutines run there, never on control threads."""

    def __init__(self, log):
        self._log = log
        self._loop = None
        self._lock = threading.Lock()

    def loop(self):
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                threading.Thread(target=self._run, name="backplane-stub-asyncio", daemon=True).start()
            return self._loop

    def _run(self):
        asyncio.set_event_loop(self._loop)
        while True:
            try:
                self._loop.run_forever()
                return
            except BaseException:  # a task of the model raised SystemExit/KeyboardInterrupt: keep serving
                self._log(pb_utils.LogLevel.ERROR, "a model task raised:\n" + traceback.format_exc())

    def run(self, coro):
        """Runs a coroutine of model code to completion and returns its value (raises what it raised)."""
        return asyncio.run_coroutine_threadsafe(_guard(coro), self.loop()).result()

    def submit(self, coro, done):
        """Runs a coroutine in the background; ``done(value, error)`` is called on the loop thread."""
        future = asyncio.run_coroutine_threadsafe(_guard(coro), self.loop())

        def finished(f):
            try:
                done(f.result(), None)
            except BaseException as e:  # noqa: B902 - every failure of model code is reported
                done(None, e)
        future.add_done_callback(finished)


async def _guard(coro):
    try:
        return await coro
    except (SystemExit, KeyboardInterrupt) as e:
        raise ModelExit(e) from e


def call_model(loop, fn, *args):
    """Calls initialize/finalize (plain or coroutine) and returns its value."""
    value = fn(*args)
    if asyncio.iscoroutine(value):
        value = loop.run(value)
    return value


def failure_message(model_name, e):
    cause = e.cause if isinstance(e, ModelExit) else e
    return "Failed to process the request(s) for model '%s', message: %s: %s" % (model_name, type(cause).__name__, cause)


def take_final(req):
    """Marks the request's result as written; returns (closed, held FINAL response or None)."""
    sender = req._sender
    if sender is None:
        req._executing = False
        return req._closed, None
    with sender._lock:
        req._executing = False
        final, req._final = req._final, None
        return sender._closed, final


def decoupled_returned(model_name, instance_name):
    """Triton's words for a decoupled execute() that returned something (naming the instance, as its stub does), then Backplane's hint."""
    return ("Failed to process the request(s) for model '%s', message: Python model '%s' is using the decoupled mode and "
            "the execute function must return None. (Backplane: a decoupled model answers through "
            "request.get_response_sender() and returns None; to return responses from execute instead, drop "
            "model_transaction_policy { decoupled: true } from its config)" % (model_name, instance_name))


def decoupled_outcomes(rt, requests, ret, error):
    out = []
    message = None
    if error is not None:
        message = failure_message(rt.model_name, error)
    elif ret is not None:
        message = decoupled_returned(rt.model_name, rt.instance_name)
    for req in requests:
        closed, _ = take_final(req)
        if closed:
            out.append(("closed",))
        elif message is not None:
            out.append(("error", message))
        elif getattr(req, "_release_flags", pb_utils.TRITONSERVER_REQUEST_RELEASE_ALL) == pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE:
            # the host runs this request again in a later execute(); this Python object and its sender are done
            req._rescheduled = True
            out.append(("rescheduled",))
        else:
            out.append(("open",))
    return out


def plain_outcomes(rt, requests, ret, error):
    n = len(requests)
    batch_error = None
    if error is not None:
        batch_error = failure_message(rt.model_name, error)
    elif ret is not None and not isinstance(ret, list):
        batch_error = ("Failed to process the request(s) for model '%s', message: Expected a list in the execute "
                       "return, found type '%s'." % (rt.model_name, type(ret)))
    elif ret is not None and len(ret) != n:
        batch_error = ("Failed to process the request(s) for model '%s', message: Number of InferenceResponse objects "
                       "do not match the number of InferenceRequest objects. InferenceRequest(s) size is:%d, and "
                       "InferenceResponse(s) size is:%d" % (rt.model_name, n, len(ret)))
    out = []
    for i, req in enumerate(requests):
        closed, final = take_final(req)
        sender = req._sender
        if final is not None:
            out.append(("final", final))  # its FINAL came while execute ran: the result carries it
            continue
        if closed:
            out.append(("closed",))
            continue
        held = sender._held if sender is not None else None
        if batch_error is not None:
            # A response the model already sent is what the client gets (as in Triton); else the error.
            out.append(("final", _close(sender, held)) if held is not None else ("error", batch_error))
            continue
        resp = None if ret is None else ret[i]
        if resp is None:
            if sender is not None:
                out.append(("open",))  # its response sender sends the FINAL later (another thread or task)
            else:
                out.append(("error", "Failed to process the request(s) for model '%s', message: execute() returned "
                                     "no response for request '%s' and did not use its response sender; return one "
                                     "InferenceResponse per request, or answer through request.get_response_sender()"
                                     % (rt.model_name, req._request_id)))
        elif not isinstance(resp, pb_utils.InferenceResponse):
            out.append(("error", "Failed to process the request(s) for model '%s', message: Expected an "
                                 "'InferenceResponse' object in the execute function return list, found type '%s'."
                                 % (rt.model_name, type(resp))))
        elif held is not None:
            out.append(("error", "Failed to process the request(s) for model '%s', message: Unable to send response. "
                                 "Non-decoupled model cannot send more than one response." % rt.model_name))
        else:
            if sender is not None:
                with sender._lock:
                    sender._closed = True
                    sender._sent += 1
            req._closed = True
            out.append(("final", resp))
    return out


def _close(sender, held):
    with sender._lock:
        sender._closed = True
        sender._held = None
    return held


def finish_in_background(rt, requests):
    """For a decoupled coroutine: when it ends, an error or a returned value fails its open requests."""

    def done(ret, error):
        if error is None and ret is None:
            return
        if error is not None:
            rt.log(pb_utils.LogLevel.ERROR, "execute() raised for model '%s':\n%s" % (
                rt.model_name, "".join(traceback.format_exception(error))))
        message = failure_message(rt.model_name, error) if error is not None else (
            decoupled_returned(rt.model_name, rt.instance_name))
        for req in requests:
            sender = req.get_response_sender()
            with sender._lock:
                if sender._closed:
                    continue
                sender._closed = True
                req._closed = True
                try:
                    rt.send_response(req, pb_utils.InferenceResponse(error=pb_utils.TritonError(message)), True)
                except Exception:
                    rt.log(pb_utils.LogLevel.ERROR, "cannot send the error of request '%s':\n%s"
                           % (req._request_id, traceback.format_exc()))
    return done


def end_dropped_senders(rt):
    """Runs on its own thread: ends requests whose response sender was garbage-collected without the FINAL.
    A plain request that had sent its one response gets it as the FINAL; any other gets an error."""
    while True:
        req = rt.dropped_senders.get()
        sender = req._sender
        if sender is None:
            continue
        try:
            with sender._lock:
                if sender._closed or req._executing:
                    continue
                sender._closed = True
                req._closed = True
                held, sender._held = sender._held, None
                if held is None:
                    held = pb_utils.InferenceResponse(error=pb_utils.TritonError(
                        "the response sender of request '%s' of model '%s' was garbage-collected before it sent the "
                        "FINAL flag; keep a reference to it until you send "
                        "flags=TRITONSERVER_RESPONSE_COMPLETE_FINAL" % (req._request_id, rt.model_name)))
                rt.send_response(req, held, True)
        except Exception:
            rt.log(pb_utils.LogLevel.ERROR, "cannot end request '%s' of a dropped response sender:\n%s"
                   % (req._request_id, traceback.format_exc()))
        finally:
            del req, sender
