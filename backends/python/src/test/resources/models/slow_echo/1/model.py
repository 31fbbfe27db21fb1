# Echoes X as Y after X[0] milliseconds, or ends with CANCELLED as soon as the request is cancelled.
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            end = time.monotonic() + float(x.reshape(-1)[0]) / 1000.0
            while time.monotonic() < end and not request.is_cancelled():
                time.sleep(0.002)
            if request.is_cancelled():
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("cancelled", pb_utils.TritonError.CANCELLED)))
            else:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x.copy())]))
        return responses
