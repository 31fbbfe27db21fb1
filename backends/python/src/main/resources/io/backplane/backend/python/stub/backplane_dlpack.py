"""DLPack for ``pb_utils.Tensor`` on the CPU: numpy's DLPack, and torch (when importable) for BF16.

numpy has no bfloat16, so a BF16 tensor keeps its 16-bit patterns in a uint16 array; it crosses
DLPack through torch, which has ``torch.bfloat16``.
"""

import numpy as np

NOT_CONTIGUOUS = ("DLPack tensor is not contiguous. Only contiguous DLPack tensors that are stored in C-Order are "
                  "supported.")


def _torch():
    try:
        import torch
        import torch.utils.dlpack
        return torch
    except ImportError:
        return None


class _Capsule:
    """Lets numpy.from_dlpack take a raw DLPack capsule (numpy only takes objects with __dlpack__)."""

    def __init__(self, capsule):
        self._capsule = capsule

    def __dlpack__(self, stream=None, **kwargs):
        if kwargs.get("max_version") is not None:
            raise TypeError("a legacy capsule")  # numpy retries without max_version
        return self._capsule

    def __dlpack_device__(self):
        return (1, 0)


def to_dlpack(tensor):
    import triton_python_backend_utils as pb_utils
    arr = tensor._array
    if arr.dtype == np.object_:
        raise pb_utils.TritonModelException("DLPack does not have support for string tensors.")
    if tensor._bf16:
        torch = _torch()
        if torch is None:
            raise pb_utils.TritonModelException("Tensor '%s' is BF16: exporting it with DLPack needs torch in the "
                                                "model's environment" % tensor._name)
        t = torch.from_numpy(np.ascontiguousarray(arr).view(np.int16)).view(torch.bfloat16)
        return torch.utils.dlpack.to_dlpack(t)
    try:
        return arr.__dlpack__()
    except BufferError:
        # A read-only array (e.g. one imported from DLPack) needs DLPack 1.0, which can say so.
        return arr.__dlpack__(max_version=(1, 0))


def from_dlpack(name, obj):
    import triton_python_backend_utils as pb_utils
    if not isinstance(name, str):
        raise pb_utils.TritonModelException("Tensor.from_dlpack: name must be a str, got %s" % type(name).__name__)
    if obj is None:
        raise pb_utils.TritonModelException("Tensor.from_dlpack('%s'): the object is None; pass a tensor that supports DLPack "
                                            "(__dlpack__) or a DLPack capsule" % name)
    torch = _torch()
    if torch is not None and isinstance(obj, torch.Tensor):
        if obj.device.type != "cpu":
            raise pb_utils.TritonModelException("Tensor.from_dlpack('%s'): the tensor is on %s; the python backend "
                                                "takes CPU tensors (call .cpu() first)" % (name, obj.device))
        if not obj.is_contiguous():
            raise pb_utils.TritonModelException(NOT_CONTIGUOUS)
        if obj.dtype == torch.bfloat16:
            return _bf16(name, np.from_dlpack(obj.view(torch.int16)).view(np.uint16))
        if obj.dtype == torch.bool:
            return pb_utils.Tensor(name, obj.numpy())
    if not hasattr(obj, "__dlpack__"):
        if type(obj).__name__ != "PyCapsule":
            raise pb_utils.TritonModelException("Tensor.from_dlpack('%s'): pass a DLPack capsule or an object with "
                                                "__dlpack__ (numpy array, torch tensor), not %s" % (name, type(obj).__name__))
        obj = _Capsule(obj)
    try:
        arr = np.from_dlpack(obj)
    except (BufferError, TypeError, RuntimeError) as e:
        if torch is not None and isinstance(obj, _Capsule):
            t = torch.utils.dlpack.from_dlpack(obj._capsule)
            return from_dlpack(name, t)
        raise pb_utils.TritonModelException("Tensor.from_dlpack('%s'): %s" % (name, e))
    if not arr.flags["C_CONTIGUOUS"]:
        raise pb_utils.TritonModelException(NOT_CONTIGUOUS)
    return pb_utils.Tensor(name, arr)


def _bf16(name, bits):
    import triton_python_backend_utils as pb_utils
    t = pb_utils.Tensor(name, bits)
    t._bf16 = True
    return t
