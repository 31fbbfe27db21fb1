# Outputs N float32 zeros: with the small shared-memory limit of its config, a large N needs more
# than the stub's pool may grow to (Triton's qa bls_memory / shared-memory tests).
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "OUT", np.zeros([int(pb_utils.get_input_tensor_by_name(r, "N").as_numpy()[0])], dtype=np.float32))])
            for r in requests]
