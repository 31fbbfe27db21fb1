# Identity on INPUT0 (any datatype). Request parameters drive test behaviour: sleep_ms.
import json
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        pass

    def execute(self, requests):
        responses = []
        for request in requests:
            p = request.parameters()
            if p != "{}":
                ms = json.loads(p).get("sleep_ms", 0)
                if ms:
                    pb_utils.Logger.log_info("identity: sleeping %d ms" % ms)  # the tests' handshake: execute has begun
                    time.sleep(ms / 1000.0)
            inp = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", inp.as_numpy())]))
        return responses
