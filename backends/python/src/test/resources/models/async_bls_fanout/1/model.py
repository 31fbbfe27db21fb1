# A decoupled model with a coroutine execute that, for every request of its batch at once, sends
# FANOUT BLS requests to async_sleeper with async_exec(decoupled=True) and awaits them together
# (the shape of Triton's async_execute_decouple_bls, with more calls in flight on one stub). Child
# k of request ID answers ID * 100 + k after a random delay; MODE alternates between a response
# sent with FINAL and a response followed by an empty FINAL. Each child's responses are checked
# (one response with OUT, then at most an empty final one) and forwarded: one response per child,
# then FINAL. What is wrong raises, so the client sees it.
import asyncio
import random

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def _one(self, request):
        ids = pb_utils.get_input_tensor_by_name(request, "ID").as_numpy()
        fanout = int(pb_utils.get_input_tensor_by_name(request, "FANOUT").as_numpy().max())
        children = []
        for k in range(fanout):
            children.append(pb_utils.InferenceRequest(
                model_name="async_sleeper",
                inputs=[pb_utils.Tensor("ID", (ids * 100 + k).astype(np.int32)),
                        pb_utils.Tensor("DELAY_MS", np.full(ids.shape, random.randint(0, 20), np.int32)),
                        pb_utils.Tensor("MODE", np.full(ids.shape, k % 2, np.int32))],
                requested_output_names=["OUT"]).async_exec(decoupled=True))
        sender = request.get_response_sender()
        for k, responses in enumerate(await asyncio.gather(*children)):
            got = list(responses)
            if not got:
                raise pb_utils.TritonModelException("child %d of %s: no response" % (k, ids.tolist()))
            for r in got:
                if r.has_error():
                    raise pb_utils.TritonModelException("child %d of %s: %s" % (k, ids.tolist(), r.error().message()))
            out = pb_utils.get_output_tensor_by_name(got[0], "OUT")
            if out is None:
                raise pb_utils.TritonModelException("child %d of %s: its first response has no OUT" % (k, ids.tolist()))
            extra = [r for r in got[1:] if r.output_tensors()]
            if extra or (k % 2 == 0 and len(got) != 1):
                raise pb_utils.TritonModelException("child %d of %s (mode %d): %d responses" % (k, ids.tolist(), k % 2, len(got)))
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out.as_numpy())]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    async def execute(self, requests):
        await asyncio.gather(*[self._one(r) for r in requests])
        return None
