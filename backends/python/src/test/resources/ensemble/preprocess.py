# Pre-processing step of the ensemble tests: RAW -> INPUT0 = RAW * 2, INPUT1 = RAW + 1, the inputs of
# the ONNX add_sub model that follows it.
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            raw = pb_utils.get_input_tensor_by_name(request, "RAW").as_numpy()
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("INPUT0", (raw * 2).astype(np.float32)),
                pb_utils.Tensor("INPUT1", (raw + 1).astype(np.float32))]))
        return responses
