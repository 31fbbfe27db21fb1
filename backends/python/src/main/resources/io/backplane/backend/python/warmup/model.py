# The Python backend's own warm-up model (BackendCapabilities.warmupModel): the host sends it zeros
# before the first client request so that the path every Python model shares (the core's batcher,
# the stub's codec, shared memory and hand-off) runs warm, without a request to any user model. It
# returns its input and touches nothing else.
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy())]) for r in requests]
