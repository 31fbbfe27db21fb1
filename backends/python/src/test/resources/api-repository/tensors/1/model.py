# Tensors the way Triton's qa models use them: DLPack round trips, a BF16 pass-through, a non-contiguous
# output, fixed-length numpy bytes, and an optional input.
import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            f = pb_utils.get_input_tensor_by_name(request, "F")
            again = pb_utils.Tensor.from_dlpack("F", f.to_dlpack())  # capsule round trip
            transposed = again.as_numpy().T  # a non-contiguous view
            assert not transposed.flags["C_CONTIGUOUS"]
            h = pb_utils.get_input_tensor_by_name(request, "H")
            assert h.triton_dtype() == pb_utils.TYPE_BF16
            try:
                h.as_numpy()
                raise AssertionError("as_numpy() of BF16 must raise")
            except pb_utils.TritonModelException:
                pass
            outputs = []
            if torch_present():  # BF16 leaves only through DLPack (numpy has no bfloat16)
                import torch.utils.dlpack
                t = torch.utils.dlpack.from_dlpack(h.to_dlpack())
                outputs.append(pb_utils.Tensor.from_dlpack("H_OUT", t))
            s = pb_utils.get_input_tensor_by_name(request, "S").as_numpy()
            fixed = np.array([bytes(x).upper() for x in s], dtype="S5")  # fixed-length bytes, like qa string_fixed
            o = pb_utils.get_input_tensor_by_name(request, "O")
            seen = np.array([-1 if o is None else int(o.as_numpy()[0])], dtype=np.int32)
            outputs += [pb_utils.Tensor("F_T", transposed), pb_utils.Tensor("S_OUT", fixed), pb_utils.Tensor("O_SEEN", seen)]
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses


def torch_present():
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False
