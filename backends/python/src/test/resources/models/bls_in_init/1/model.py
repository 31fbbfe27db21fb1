# BLS from initialize(), as in qa bls_init_error: there is no request to be a child of.
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        pb_utils.InferenceRequest(model_name="add_sub", inputs=[pb_utils.Tensor("INPUT0", np.zeros([4], np.float32))],
                                  requested_output_names=["OUTPUT0"]).exec()

    def execute(self, requests):
        return None
