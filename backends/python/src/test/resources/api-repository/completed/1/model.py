# No config.pbtxt: the model describes itself in auto_complete_config, like Triton's auto_complete example.
import json

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        for tensor in ({"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]},
                       {"name": "INPUT1", "data_type": "TYPE_FP32", "dims": [4], "optional": True}):
            auto_complete_model_config.add_input(tensor)
        auto_complete_model_config.add_output({"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]})
        auto_complete_model_config.set_max_batch_size(8)
        auto_complete_model_config.set_dynamic_batching()
        return auto_complete_model_config

    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.seen = {"inputs": [t["name"] for t in config["input"]], "max_batch_size": config["max_batch_size"],
                     "dynamic_batching": "dynamic_batching" in config}

    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1")  # optional
            out = a + (b.as_numpy() if b is not None else 0)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", out.astype(np.float32))],
                                                        parameters={"seen": json.dumps(self.seen)}))
        return responses
