"""Shared by the sender models: MODE picks how a request is answered."""
import asyncio
import json
import os
import sys
import threading

import numpy as np

import triton_python_backend_utils as pb_utils

RETURN, SEND_FINAL, SEND_THEN_FINAL, SEND_LATER, FINAL_ONLY, SEND_TWICE, SEND_AND_RETURN, NOTHING, EXIT, INTERRUPT, \
    PARAMETERS, ECHO, RAISE_ERROR, HOLD_SENDER, DROP_SENDER, SEND_THEN_DROP = range(16)

_held = []


def response(value, parameters=None):
    out = pb_utils.Tensor("OUT", np.array([value], dtype=np.int32))
    return pb_utils.InferenceResponse(output_tensors=[out], parameters=parameters)


def in_thread(fn):
    threading.Thread(target=fn, daemon=True).start()


def in_task(fn):
    async def later():
        await asyncio.sleep(0.01)
        fn()
    task = asyncio.get_running_loop().create_task(later())
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


_tasks = set()


def answer(requests, run_later):
    out = []
    for request in requests:
        mode = int(pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0])
        result = None
        if mode == RETURN:
            result = response(1)
        elif mode == SEND_FINAL:
            request.get_response_sender().send(response(2), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        elif mode == SEND_THEN_FINAL:
            sender = request.get_response_sender()
            sender.send(response(3))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        elif mode == SEND_LATER:
            sender = request.get_response_sender()

            def send(sender=sender):
                sender.send(response(4))
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            run_later(send)
        elif mode == FINAL_ONLY:
            request.get_response_sender().send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        elif mode == SEND_TWICE:
            sender = request.get_response_sender()
            sender.send(response(6))
            sender.send(response(66))
        elif mode == SEND_AND_RETURN:
            request.get_response_sender().send(response(7), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            result = response(77)
        elif mode == NOTHING:
            pass
        elif mode == EXIT:
            sys.exit(3)
        elif mode == INTERRUPT:
            raise KeyboardInterrupt("stop")
        elif mode == PARAMETERS:
            result = response(10, parameters={"text": "ten", "count": 10, "flag": True})
        elif mode == ECHO:
            seen = {"request_parameters": json.loads(request.parameters()), "argv": sys.argv, "pid": os.getpid()}
            result = response(11, parameters={"seen": json.dumps(seen)})
        elif mode == RAISE_ERROR:
            result = pb_utils.InferenceResponse(error=pb_utils.TritonError("no such thing", pb_utils.TritonError.NOT_FOUND))
        elif mode == DROP_SENDER:
            request.get_response_sender()  # taken, never used, dropped
        elif mode == SEND_THEN_DROP:
            request.get_response_sender().send(response(15))  # one response, no FINAL, then dropped
        elif mode == HOLD_SENDER:
            _held.append(request.get_response_sender())  # never answers: only unload or the watchdog end it
        out.append(result)
    if all(r is None for r in out):
        return None
    return out
