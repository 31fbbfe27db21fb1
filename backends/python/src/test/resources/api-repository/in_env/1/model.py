# Reports the interpreter it runs in, to show EXECUTION_ENV_PATH took effect.
import sys

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy())],
                                           parameters={"prefix": sys.prefix, "executable": sys.executable})
                for r in requests]
