# Returns what the model sees: initialize args, request metadata and BYTES handling.
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.args = dict(args)
        cfg = json.loads(args["model_config"])
        self.in_cfg = pb_utils.get_input_config_by_name(cfg, "TEXT")
        self.cfg = cfg

    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
            upper = np.array([t.upper() for t in text.reshape(-1)], dtype=np.object_).reshape(text.shape)
            info = {
                "args": self.args,
                "request_id": request.request_id(),
                "correlation_id": request.correlation_id(),
                "flags": request.flags(),
                "parameters": json.loads(request.parameters()),
                "requested": request.requested_output_names(),
                "in_cfg_type": self.in_cfg["data_type"],
                "decoupled": self.cfg["model_transaction_policy"]["decoupled"],
                "np_type": str(np.dtype(pb_utils.triton_string_to_numpy("TYPE_FP32"))),
                "triton_type": pb_utils.numpy_to_triton_type(np.float32),
                "text_dtype": str(text.dtype),
                "cancelled": request.is_cancelled(),
            }
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("UPPER", upper),
                pb_utils.Tensor("INFO", np.array([json.dumps(info).encode()], dtype=np.object_)),
            ]))
        return responses
