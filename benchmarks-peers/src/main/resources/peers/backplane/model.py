# Identity for the peers benchmark: returns a numpy copy of INPUT0 for every request.
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy().copy())])
                for r in requests]
