"""Sleeps for the seconds it is given and answers them back (tools/fleet-test.sh's drain check)."""
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            seconds = pb_utils.get_input_tensor_by_name(request, "SECONDS").as_numpy()
            time.sleep(float(seconds[0]))
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("SLEPT", seconds)]))
        return responses
