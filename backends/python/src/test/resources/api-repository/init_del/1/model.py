# Counts initialize and finalize calls in a file beside the model (like Triton's qa model_init_del), so a test can
# check that every initialized instance is finalized once.
import fcntl
import os

import triton_python_backend_utils as pb_utils


def count(kind):
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), kind + ".count")
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write("x")


class TritonPythonModel:
    def initialize(self, args):
        count("initialize")

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy())])
                for r in requests]

    def finalize(self):
        count("finalize")
