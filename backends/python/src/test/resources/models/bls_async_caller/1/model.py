# async_exec in the style of Triton's examples/bls/async_model.py and qa bls_async: two BLS calls
# to add_sub run concurrently (asyncio.gather); OUTPUT0 = (a+b) + (a-b) = 2a, OUTPUT1 = (a+b) - (a-b) = 2b.
import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def _one(self, request):
        in0 = pb_utils.get_input_tensor_by_name(request, "INPUT0")
        in1 = pb_utils.get_input_tensor_by_name(request, "INPUT1")
        calls = [pb_utils.InferenceRequest(model_name="add_sub", inputs=[in0, in1],
                                           requested_output_names=[name]).async_exec()
                 for name in ("OUTPUT0", "OUTPUT1")]
        plus, minus = await asyncio.gather(*calls)
        for r in (plus, minus):
            if r.has_error():
                raise pb_utils.TritonModelException(r.error().message())
        p = pb_utils.get_output_tensor_by_name(plus, "OUTPUT0").as_numpy()
        m = pb_utils.get_output_tensor_by_name(minus, "OUTPUT1").as_numpy()
        return pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", p + m), pb_utils.Tensor("OUTPUT1", p - m)])

    def execute(self, requests):
        async def run():
            return await asyncio.gather(*[self._one(r) for r in requests])
        return list(asyncio.run(run()))
