# bls_modes with a coroutine execute (Triton's async execute), plain or decoupled: every BLS mode,
# the synchronous ones blocking the event loop as they do in Triton. REPORT as in bls_modes.
import asyncio
import json

import numpy as np
import triton_python_backend_utils as pb_utils


def plain(name):
    return pb_utils.InferenceRequest(model_name=name, requested_output_names=["OUTPUT0"],
                                     inputs=[pb_utils.Tensor("INPUT0", np.array([1, 2], dtype=np.float32)),
                                             pb_utils.Tensor("INPUT1", np.array([10, 20], dtype=np.float32))])


def square(n):
    return pb_utils.InferenceRequest(model_name="square", requested_output_names=["OUT"],
                                     inputs=[pb_utils.Tensor("IN", np.array([n], dtype=np.int32))])


def sums(r):
    if r.has_error():
        return "error: " + r.error().message()
    return pb_utils.get_output_tensor_by_name(r, "OUTPUT0").as_numpy().tolist()


def values(responses):
    out = []
    for r in responses:
        if r.has_error():
            return "error: " + r.error().message()
        t = pb_utils.get_output_tensor_by_name(r, "OUT")
        if t is not None:
            out.append(int(t.as_numpy()[0]))
    return out


async def async_modes(n):
    rep = {"async_exec": sums(await plain("add_sub").async_exec())}
    iterator = await square(n).async_exec(decoupled=True)
    rep["await_async_exec_decoupled_type"] = type(iterator).__name__
    rep["await_async_exec_decoupled"] = values(iterator)
    got = []
    async for r in await square(n).async_exec(decoupled=True):
        got.append(int(pb_utils.get_output_tensor_by_name(r, "OUT").as_numpy()[0]))
    rep["async_for_await_async_exec_decoupled"] = got
    got = []
    async for r in square(n).async_exec(decoupled=True):
        got.append(int(pb_utils.get_output_tensor_by_name(r, "OUT").as_numpy()[0]))
    rep["async_for_async_exec_decoupled"] = got
    both = await asyncio.gather(plain("add_sub").async_exec(), square(n).async_exec(decoupled=True))
    rep["gather"] = [sums(both[0]), values(both[1])]
    return rep


def sync_modes(request):
    target = pb_utils.get_input_tensor_by_name(request, "TARGET").as_numpy()[0]
    n = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
    rep = {"target_type": type(target).__name__,
           "name_tensor": sums(plain(target).exec()),
           "name_str": sums(plain("add_sub").exec()),
           "name_bytes": sums(plain(b"add_sub").exec()),
           "name_numpy_bytes": sums(plain(np.bytes_(b"add_sub")).exec()),
           "name_numpy_str": sums(plain(np.str_("add_sub")).exec()),
           "exec": sums(plain("add_sub").exec()),
           "exec_decoupled": values(square(n).exec(decoupled=True))}
    for key, bad in (("bad_int", 5), ("bad_none", None), ("bad_list", ["add_sub"])):
        try:
            plain(bad)
            rep[key] = "accepted"
        except TypeError as e:
            rep[key] = str(e)
    return rep, n


class TritonPythonModel:
    def initialize(self, args):
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(json.loads(args["model_config"]))

    async def execute(self, requests):
        responses = []
        for request in requests:
            rep, n = sync_modes(request)
            rep.update(await async_modes(n))
            rep["decoupled_model"] = self.decoupled
            response = pb_utils.InferenceResponse([pb_utils.Tensor("REPORT", np.array([json.dumps(rep)], dtype=np.object_))])
            if self.decoupled:
                sender = request.get_response_sender()
                sender.send(response)
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            else:
                responses.append(response)
        return None if self.decoupled else responses
