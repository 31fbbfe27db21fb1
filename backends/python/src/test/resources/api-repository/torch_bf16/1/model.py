# BF16 through torch, Triton's way: a TYPE_BF16 input reaches torch as torch.bfloat16 through
# DLPack (numpy has no bfloat16, so as_numpy() raises), torch computes in bfloat16, and a bfloat16
# torch tensor leaves as a TYPE_BF16 output through pb_utils.Tensor.from_dlpack.
import torch
import torch.utils.dlpack

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X")
            assert x.triton_dtype() == pb_utils.TYPE_BF16
            try:
                x.as_numpy()
                raise AssertionError("as_numpy() of a BF16 tensor must raise")
            except pb_utils.TritonModelException as e:  # Triton's sentence, which its QA identity_bf16 model matches
                assert "tensor dtype is bf16 and cannot be converted to numpy" in str(e).lower(), str(e)
            t = torch.utils.dlpack.from_dlpack(x.to_dlpack())
            assert t.dtype == torch.bfloat16, t.dtype
            f = torch.from_numpy(pb_utils.get_input_tensor_by_name(request, "F").as_numpy())
            x2 = pb_utils.Tensor.from_dlpack("X2", t * 2)
            fb = pb_utils.Tensor.from_dlpack("F_BF16", f.to(torch.bfloat16))
            assert x2.triton_dtype() == pb_utils.TYPE_BF16 and fb.triton_dtype() == pb_utils.TYPE_BF16
            xf = pb_utils.Tensor("X_FP32", t.to(torch.float32).numpy())
            responses.append(pb_utils.InferenceResponse([x2, fb, xf]))
        return responses
