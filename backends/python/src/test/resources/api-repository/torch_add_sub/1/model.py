# add/sub with a torch.nn.Module on the CPU, tensors crossing through DLPack (like Triton's pytorch example).
import torch
import torch.utils.dlpack

import triton_python_backend_utils as pb_utils


class AddSub(torch.nn.Module):
    def forward(self, a, b):
        return a + b, a - b


class TritonPythonModel:
    def initialize(self, args):
        self.model = AddSub().eval()

    def execute(self, requests):
        responses = []
        for request in requests:
            a = torch.utils.dlpack.from_dlpack(pb_utils.get_input_tensor_by_name(request, "INPUT0").to_dlpack())
            b = torch.from_numpy(pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy())
            with torch.no_grad():
                add, sub = self.model(a, b)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor.from_dlpack("OUTPUT0", add),
                                                         pb_utils.Tensor.from_dlpack("OUTPUT1", torch.utils.dlpack.to_dlpack(sub))]))
        return responses
