# BLS with request parameters in the style of qa bls_parameters: passes a dict of parameters to
# "params_echo", which answers with the parameters it received (JSON); returns that text.
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X")
            params = {"bool_key": True, "int_key": 42, "str_key": "hello"}
            r = pb_utils.InferenceRequest(model_name="params_echo", inputs=[x], requested_output_names=["P"],
                                          parameters=params).exec()
            if r.has_error():
                responses.append(pb_utils.InferenceResponse(error=r.error()))
                continue
            got = json.loads(pb_utils.get_output_tensor_by_name(r, "P").as_numpy()[0])
            ok = "ok" if got == params else "mismatch: %r" % (got,)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("P", np.array([ok], dtype=np.object_))]))
        return responses
