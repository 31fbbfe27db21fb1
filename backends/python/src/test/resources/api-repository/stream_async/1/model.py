# A decoupled model with a coroutine execute: a request with WAIT=1 waits until a later request
# (WAIT=0) releases it, which can only happen if both run at once on the stub's event loop.
# WAIT=2 raises in the coroutine; WAIT=3 returns a value, which a decoupled model must not; WAIT=4 streams until
# the request is cancelled.
import asyncio

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.released = None

    async def execute(self, requests):
        if self.released is None:
            self.released = asyncio.Event()
        for request in requests:
            wait = int(pb_utils.get_input_tensor_by_name(request, "WAIT").as_numpy()[0])
            sender = request.get_response_sender()
            if wait == 1:
                sender.send(self.response(100))
                await self.released.wait()
                sender.send(self.response(101), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            elif wait == 0:
                self.released.set()
                final = pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([200], dtype=np.int32))],
                                                   parameters={"released": True})
                sender.send(final, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            elif wait == 4:  # like Triton's response_sender_until_cancelled: stream until the client cancels
                while not sender.is_cancelled():
                    sender.send(self.response(500))
                    await asyncio.sleep(0.005)
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            elif wait == 2:
                sender.send(self.response(300))
                raise ValueError("broken coroutine")
            else:
                return [self.response(400)]
        return None

    @staticmethod
    def response(value):
        return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([value], dtype=np.int32))])
