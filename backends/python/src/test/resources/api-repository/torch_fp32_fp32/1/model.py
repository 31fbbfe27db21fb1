# Like Triton's qa pytorch_fp32_fp32 models: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1,
# FP32 in and out, computed by torch on the CPU from numpy views (torch.from_numpy) and back.
import torch

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        torch.set_num_threads(1)

    def execute(self, requests):
        responses = []
        for request in requests:
            a = torch.from_numpy(pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy())
            b = torch.from_numpy(pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy())
            with torch.no_grad():
                add, sub = torch.add(a, b), torch.sub(a, b)
            assert add.dtype == torch.float32
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", add.numpy()),
                                                         pb_utils.Tensor("OUTPUT1", sub.numpy())]))
        return responses
