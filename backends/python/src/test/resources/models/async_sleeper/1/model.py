# A decoupled model with a coroutine execute (the shape of Triton's async execute models): each
# request of the batch sleeps DELAY_MS on the event loop, concurrently with the others and with
# other executes, then answers OUT = ID. MODE 0 sends the response and FINAL in one send(); MODE 1
# sends the response, then an empty FINAL.
import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def _one(self, request):
        ids = pb_utils.get_input_tensor_by_name(request, "ID").as_numpy()
        delay = pb_utils.get_input_tensor_by_name(request, "DELAY_MS").as_numpy()
        mode = int(pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy().max())
        await asyncio.sleep(float(delay.max()) / 1000.0)
        sender = request.get_response_sender()
        response = pb_utils.InferenceResponse([pb_utils.Tensor("OUT", ids.astype(np.int32))])
        if mode == 0:
            sender.send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        else:
            sender.send(response)
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    async def execute(self, requests):
        await asyncio.gather(*[self._one(r) for r in requests])
        return None
