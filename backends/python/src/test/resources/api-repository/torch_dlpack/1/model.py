# DLPack between pb_utils.Tensor and torch the ways Triton's qa dlpack models use it: a capsule
# (torch.utils.dlpack.from_dlpack(t.to_dlpack())), the protocol (torch.from_dlpack(t)), and back
# with pb_utils.Tensor.from_dlpack(name, torch_tensor) or from a capsule. SHARED reports whether
# each exchange shared memory instead of copying.
import numpy as np
import torch
import torch.utils.dlpack

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            f16 = pb_utils.get_input_tensor_by_name(request, "F16")
            i64 = pb_utils.get_input_tensor_by_name(request, "I64")
            b = pb_utils.get_input_tensor_by_name(request, "B")
            tf = torch.utils.dlpack.from_dlpack(f16.to_dlpack())  # capsule
            ti = torch.from_dlpack(i64)  # __dlpack__ protocol
            tb = torch.utils.dlpack.from_dlpack(b.to_dlpack())
            assert tf.dtype == torch.float16 and ti.dtype == torch.int64 and tb.dtype == torch.bool, (tf.dtype, ti.dtype, tb.dtype)
            shared_in = tf.data_ptr() == f16.as_numpy().ctypes.data
            out_f = pb_utils.Tensor.from_dlpack("F16_OUT", tf * 2)  # a torch tensor, through its __dlpack__
            doubled = ti * 10
            out_i = pb_utils.Tensor.from_dlpack("I64_OUT", torch.utils.dlpack.to_dlpack(doubled))  # a capsule
            shared_out = out_i.as_numpy().ctypes.data == doubled.data_ptr()
            out_b = pb_utils.Tensor.from_dlpack("B_OUT", torch.logical_not(tb))
            back = torch.utils.dlpack.from_dlpack(out_i.to_dlpack())  # and round again
            assert torch.equal(back, doubled)
            shared = pb_utils.Tensor("SHARED", np.array([shared_in, shared_out, back.data_ptr() == doubled.data_ptr()]))
            responses.append(pb_utils.InferenceResponse([out_f, out_i, out_b, shared]))
        return responses
