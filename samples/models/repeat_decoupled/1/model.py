# A decoupled Triton python_backend model: one response per element of IN, sent through the
# request's response sender, then TRITONSERVER_RESPONSE_COMPLETE_FINAL. Follows the decoupled
# examples of Triton's python_backend (repeat_model.py, square_model.py).
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.model_config = model_config = json.loads(args["model_config"])

        using_decoupled = pb_utils.using_decoupled_model_transaction_policy(model_config)
        if not using_decoupled:
            raise pb_utils.TritonModelException(
                """the model `{}` can support only decoupled transaction policy""".format(
                    args["model_name"]
                )
            )

        out_config = pb_utils.get_output_config_by_name(model_config, "OUT")
        idx_config = pb_utils.get_output_config_by_name(model_config, "IDX")
        self.out_dtype = pb_utils.triton_string_to_numpy(out_config["data_type"])
        self.idx_dtype = pb_utils.triton_string_to_numpy(idx_config["data_type"])

    def execute(self, requests):
        """A decoupled model answers through each request's response sender and returns None."""
        for request in requests:
            sender = request.get_response_sender()
            try:
                values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy().reshape(-1)
                for idx, value in enumerate(values):
                    if request.is_cancelled():
                        sender.send(
                            pb_utils.InferenceResponse(
                                error=pb_utils.TritonError(
                                    "request cancelled", pb_utils.TritonError.CANCELLED
                                )
                            ),
                            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                        )
                        break
                    out = pb_utils.Tensor("OUT", np.array([value], dtype=self.out_dtype))
                    idx_tensor = pb_utils.Tensor("IDX", np.array([idx], dtype=self.idx_dtype))
                    sender.send(pb_utils.InferenceResponse(output_tensors=[out, idx_tensor]))
                else:
                    sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            except Exception as e:  # answer this request with the error; the others go on
                sender.send(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError(str(e))),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )
        return None

    def finalize(self):
        pass
