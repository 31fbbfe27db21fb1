# Calls "slow_echo" through BLS and waits for it: the parent of a child that runs as long as it
# is not cancelled. TARGET chooses the callee (its own name: a call to itself).
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X")
            target = pb_utils.get_input_tensor_by_name(request, "TARGET").as_numpy()[0]
            target = target.decode("utf-8") if isinstance(target, bytes) else str(target)
            r = pb_utils.InferenceRequest(model_name=target, inputs=[x, pb_utils.Tensor("TARGET", np.array([b"slow_echo"], dtype=np.object_))]
                                          if target != "slow_echo" else [x],
                                          requested_output_names=["Y"]).exec()
            if r.has_error():
                responses.append(pb_utils.InferenceResponse(error=r.error()))
            else:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_output_tensor_by_name(r, "Y").as_numpy())]))
        return responses
