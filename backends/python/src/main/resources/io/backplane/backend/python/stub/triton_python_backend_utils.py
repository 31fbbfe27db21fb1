"""Backplane's implementation of Triton's ``triton_python_backend_utils`` module.

Models written for Triton's python_backend import this module as ``pb_utils`` and run unchanged.
The runtime hooks (``_runtime``) are installed by ``backplane_stub``.
"""

import contextvars
import enum
import json
import numbers
import struct
import threading
import weakref

import numpy as np

import backplane_dlpack as _dlpack

TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2

# Triton's TRITONSERVER_DataType values.
TYPE_INVALID = 0
TYPE_BOOL = 1
TYPE_UINT8 = 2
TYPE_UINT16 = 3
TYPE_UINT32 = 4
TYPE_UINT64 = 5
TYPE_INT8 = 6
TYPE_INT16 = 7
TYPE_INT32 = 8
TYPE_INT64 = 9
TYPE_FP16 = 10
TYPE_FP32 = 11
TYPE_FP64 = 12
TYPE_STRING = 13
TYPE_BF16 = 14

_runtime = None  # set by backplane_stub

# The request given to execute() whose inputs or response sender the running code (this thread's
# context, or this asyncio task's) used last: a BLS call made there is a child of that request
# (backplane_bls picks the parent). A weak reference, or None.
_current_request = contextvars.ContextVar("backplane_current_request", default=None)

_TRITON_TO_NUMPY = {
    TYPE_BOOL: np.bool_, TYPE_UINT8: np.uint8, TYPE_UINT16: np.uint16, TYPE_UINT32: np.uint32,
    TYPE_UINT64: np.uint64, TYPE_INT8: np.int8, TYPE_INT16: np.int16, TYPE_INT32: np.int32,
    TYPE_INT64: np.int64, TYPE_FP16: np.float16, TYPE_FP32: np.float32, TYPE_FP64: np.float64,
    TYPE_STRING: np.object_,
}
_NUMPY_TO_TRITON = {np.dtype(v): k for k, v in _TRITON_TO_NUMPY.items() if v is not np.object_}
_STRING_TO_TRITON = {
    "TYPE_BOOL": TYPE_BOOL, "TYPE_UINT8": TYPE_UINT8, "TYPE_UINT16": TYPE_UINT16, "TYPE_UINT32": TYPE_UINT32,
    "TYPE_UINT64": TYPE_UINT64, "TYPE_INT8": TYPE_INT8, "TYPE_INT16": TYPE_INT16, "TYPE_INT32": TYPE_INT32,
    "TYPE_INT64": TYPE_INT64, "TYPE_FP16": TYPE_FP16, "TYPE_FP32": TYPE_FP32, "TYPE_FP64": TYPE_FP64,
    "TYPE_STRING": TYPE_STRING, "TYPE_BF16": TYPE_BF16,
}


class TritonError:
    """An error a model returns in an InferenceResponse (Triton's codes)."""
    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    def __init__(self, message, code=INTERNAL):
        self._message = str(message)
        self._code = int(code)

    def message(self):
        return self._message

    def code(self):
        return self._code

    def __str__(self):
        return self._message

    def __repr__(self):
        return "TritonError(%r, code=%d)" % (self._message, self._code)


class TritonModelException(Exception):
    """Raised by this module for API misuse; models may raise it too."""

    def message(self):
        return str(self)


class LogLevel(enum.IntEnum):
    """Triton's log levels (an enum, as Triton's binding: a plain int is not one)."""
    INFO = 0
    WARNING = 1
    ERROR = 2
    VERBOSE = 3


_MISSING = object()


def _incompatible(function, signature, given):
    """The TypeError Triton's binding (pybind11) raises for an argument of the wrong type."""
    return TypeError("%s(): incompatible function arguments. The following argument types are supported:\n    1. %s\n\n"
                     "Invoked with: %s" % (function, signature, given))


class Logger:
    """Sends log lines to the host's log, tagged with model and instance.

    As in Triton (whose binding nests the enum in Logger and exports its values), the levels are
    also ``Logger.LogLevel`` and ``Logger.INFO``/``WARNING``/``ERROR``/``VERBOSE``:
    ``logger.log(msg, logger.WARNING)``. A plain int is not a level (a TypeError, as in Triton).
    """
    LogLevel = LogLevel
    INFO = LogLevel.INFO
    WARNING = LogLevel.WARNING
    ERROR = LogLevel.ERROR
    VERBOSE = LogLevel.VERBOSE

    @staticmethod
    def log(message, level=LogLevel.INFO):
        if not isinstance(message, str) or not isinstance(level, LogLevel):
            raise _incompatible("log", "(message: str, level: triton_python_backend_utils.LogLevel = LogLevel.INFO) -> None",
                                "%r, %r" % (message, level))
        if _runtime is not None:
            _runtime.log(int(level), str(message))

    @staticmethod
    def log_info(message):
        Logger.log(message, LogLevel.INFO)

    @staticmethod
    def log_warn(message):
        Logger.log(message, LogLevel.WARNING)

    @staticmethod
    def log_error(message):
        Logger.log(message, LogLevel.ERROR)

    @staticmethod
    def log_verbose(message):
        Logger.log(message, LogLevel.VERBOSE)


def _to_object_array(array):
    if array.dtype == np.object_:
        return array
    return array.astype(np.object_)


class Tensor:
    """A named numpy array. Inputs are views of the instance's shared memory (no copy).

    BF16 tensors hold their raw 16-bit patterns (numpy has no bfloat16); as in Triton, they are
    reached through DLPack (``to_dlpack``/``from_dlpack``, e.g. with torch), not ``as_numpy``.
    """
    __slots__ = ("_name", "_array", "_bf16")

    def __init__(self, name, array, *args):
        # Triton's binding refuses a name that is not a str and data that is not an array with a TypeError.
        if not isinstance(name, str) or not isinstance(array, np.ndarray):
            raise TypeError("__init__(): incompatible constructor arguments. The following argument types are supported:\n"
                            "    1. triton_python_backend_utils.Tensor(name: str, numpy_array: numpy.ndarray)\n\n"
                            "Invoked with: %r, %s\n(Backplane: the name must be a str and the data a numpy.ndarray)"
                            % (name, type(array).__name__))
        if array.dtype.kind in ("S", "U"):
            array = _to_object_array(array)
        elif array.dtype != np.object_ and array.dtype not in _NUMPY_TO_TRITON:
            raise TritonModelException("Tensor '%s': numpy dtype %s has no Triton datatype" % (name, array.dtype))
        self._name = name
        self._array = array
        self._bf16 = False

    def name(self):
        return self._name

    def as_numpy(self):
        if self._bf16:
            raise TritonModelException("Tensor dtype is BF16 and cannot be converted to NumPy. Use to_dlpack() and from_dlpack() "
                                       "instead. (Backplane: tensor '%s'; e.g. torch.utils.dlpack.from_dlpack(tensor.to_dlpack()))"
                                       % self._name)
        return self._array

    def shape(self):
        return list(self._array.shape)

    def triton_dtype(self):
        return TYPE_BF16 if self._bf16 else numpy_to_triton_type(self._array.dtype)

    def is_cpu(self):
        return True

    def to_dlpack(self):
        return _dlpack.to_dlpack(self)

    def __dlpack__(self, *args, **kwargs):
        return self.to_dlpack()

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU, device 0

    @staticmethod
    def from_dlpack(name, dlpack_tensor):
        return _dlpack.from_dlpack(name, dlpack_tensor)

    def __repr__(self):
        return "Tensor(%r, dtype=%s, shape=%s)" % (self._name, "BF16" if self._bf16 else self._array.dtype,
                                                  list(self._array.shape))


class InferenceResponse:
    def __init__(self, output_tensors=_MISSING, error=None, parameters=None):
        if output_tensors is _MISSING:
            output_tensors = []
        if not isinstance(output_tensors, (list, tuple)):
            # Triton's binding: a TypeError for None or anything that is not a list
            raise TypeError("__init__(): incompatible constructor arguments. The following argument types are supported:\n"
                            "    1. triton_python_backend_utils.InferenceResponse(output_tensors: List[triton_python_backend_utils.Tensor]"
                            " = [], error: triton_python_backend_utils.TritonError = None, parameters: object = None)\n\n"
                            "Invoked with: kwargs: output_tensors=%r\n(Backplane: output_tensors must be a list of pb_utils.Tensor)"
                            % (output_tensors,))
        for t in output_tensors:
            if not isinstance(t, Tensor):
                raise TritonModelException("InferenceResponse: output_tensors holds a %s, not a pb_utils.Tensor"
                                           % type(t).__name__)
        if error is not None and not isinstance(error, TritonError):
            error = TritonError(str(error))
        self._outputs = list(output_tensors)
        self._error = error
        self._parameters = _parameters_json(parameters)

    def output_tensors(self):
        return self._outputs

    def has_error(self):
        return self._error is not None

    def error(self):
        return self._error

    def parameters(self):
        return self._parameters


def _parameters_json(parameters):
    """Request or response parameters as their JSON object string, checked as Triton's binding does
    (PyDefaultArgumentToMutableType<py::dict> then PyParametersToJSON): None or a dict whose keys
    are str and values bool, int or str; anything else raises TritonModelException with Triton's text."""
    if parameters is None:
        return "{}"
    if not isinstance(parameters, dict):
        # Triton's text names the C++ type it expects (GCC's typeid name of py::dict)
        raise TritonModelException("Expect N8pybind114dictE, got %s (Backplane: parameters must be a dict of str keys to "
                                   "bool, int or str values, or None)" % type(parameters))
    for key, value in parameters.items():
        if not isinstance(key, str):
            raise TritonModelException("Expect parameters keys to have type str, found type %s" % type(key))
        if not isinstance(value, (bool, int, str)):
            raise TritonModelException("Expect parameters values to have type bool/int/str, found type %s" % type(value))
    return json.dumps(parameters)


class InferenceResponseSender:
    """Sends the responses of one request; usable from any thread.

    Triton's rules: flags are 0 or TRITONSERVER_RESPONSE_COMPLETE_FINAL; a response is required
    when flags are 0; nothing is sent after the FINAL. A non-decoupled model sends exactly one
    response, and its FINAL comes with it or after it.
    """
    __slots__ = ("_request", "_lock", "_closed", "_sent", "_held")

    def __init__(self, request):
        self._request = request
        self._lock = threading.Lock()
        self._closed = False
        self._sent = 0
        self._held = None  # non-decoupled: the response, until its FINAL

    def send(self, response=None, flags=0):
        if flags != TRITONSERVER_RESPONSE_COMPLETE_FINAL and flags != 0:
            raise TritonModelException("Unable to send response. Unsupported flag provided.")
        if response is None and flags == 0:
            raise TritonModelException("Inference Response object must be provided when the response flags is set to zero.")
        if response is not None and not isinstance(response, InferenceResponse):
            raise TritonModelException("send() takes a pb_utils.InferenceResponse, got %s" % type(response).__name__)
        final = flags == TRITONSERVER_RESPONSE_COMPLETE_FINAL
        decoupled = _runtime.decoupled
        with self._lock:
            if not decoupled:
                if response is not None and self._sent > 0:
                    raise TritonModelException(
                        "Unable to send response. Non-decoupled model cannot send more than one response.")
                if response is None and final and self._sent == 0:
                    raise TritonModelException(
                        "Unable to send response. Non-decoupled model cannot send complete final before sending a response.")
            if self._closed:
                raise TritonModelException("Unable to send response. Response sender has been closed.")
            self._sent += 1
            if final:
                self._closed = True
                self._request._closed = True
            if decoupled:
                _runtime.send_response(self._request, response, final)
                return
            # A non-decoupled request ends with one FINAL response: hold the response until then.
            if response is not None:
                self._held = response
            if final:
                held, self._held = self._held, None
                _runtime.close_request(self._request, held)

    def is_cancelled(self):
        return self._request.is_cancelled()

    def __del__(self):
        # Dropped without its FINAL (no thread or task holds it any more): the request would stay open
        # until unload. The stub ends it instead, on its own thread (SimpleQueue.put is safe here).
        if not self._closed and _runtime is not None and self._request._index >= 0 \
                and not getattr(self._request, "_rescheduled", False):
            _runtime.dropped_senders.put(self._request)



def _sequence_decode(field):
    """The host's sequence field "<flags>:<kind><id>" (kind n: uint64, s: string, empty: none) as (flags, correlation id)."""
    flags, _, rest = field.partition(":")
    kind, cid = rest[:1], rest[1:]
    if kind == "n":
        return int(flags or 0), int(cid)
    if kind == "s":
        return int(flags or 0), cid
    return int(flags or 0), 0


def _sequence_encode(correlation_id, flags):
    """The inverse of _sequence_decode, for BLS requests."""
    if correlation_id is None or correlation_id == 0 or correlation_id == "":
        return "%d:" % int(flags or 0)
    if isinstance(correlation_id, str):
        return "%d:s%s" % (int(flags or 0), correlation_id)
    return "%d:n%d" % (int(flags or 0), int(correlation_id))


_REQUEST_SIGNATURE = (
    "__init__(): incompatible constructor arguments. The following argument types are supported:\n"
    "    1. triton_python_backend_utils.InferenceRequest(request_id: str = '', correlation_id: object = 0, "
    "inputs: List[triton_python_backend_utils.Tensor], requested_output_names: List[str], model_name: str, "
    "model_version: int = -1, flags: int = 0, timeout: int = 0, "
    "preferred_memory: triton_python_backend_utils.PreferredMemory = ..., "
    "trace: triton_python_backend_utils.InferenceTrace = ..., parameters: object = None)\n\n")


def _bls_model_name(model_name):
    """model_name as Triton's binding takes it: a str, or bytes (e.g. ``tensor.as_numpy()[0]`` of a
    TYPE_STRING input, a numpy bytes scalar) read as UTF-8; anything else is Triton's TypeError."""
    if isinstance(model_name, str):  # numpy.str_ too
        return str(model_name)
    if isinstance(model_name, (bytes, bytearray)):  # numpy.bytes_ too
        try:
            return bytes(model_name).decode("utf-8")
        except UnicodeDecodeError as e:
            raise TypeError(_REQUEST_SIGNATURE + "Invoked with: kwargs: model_name=%r\n(Backplane: model_name bytes must be "
                            "UTF-8: %s)" % (model_name, e)) from None
    if isinstance(model_name, np.ndarray) and model_name.shape == () and model_name.dtype.kind in ("S", "U", "O"):
        return _bls_model_name(model_name.item())
    shown = "<missing>" if model_name is _MISSING else repr(model_name)
    raise TypeError(_REQUEST_SIGNATURE + "Invoked with: kwargs: model_name=%s\n(Backplane: model_name must be a str or bytes, "
                    "such as the element of a TYPE_STRING input (tensor.as_numpy()[0]), not %s)"
                    % (shown, "a missing argument" if model_name is _MISSING else type(model_name).__name__))


class InferenceRequest:
    """A request given to execute(); one you construct yourself is a BLS call: exec() or async_exec() it."""

    def __init__(self, model_name=_MISSING, inputs=_MISSING, requested_output_names=_MISSING, request_id="", correlation_id=0,
                 flags=0, timeout=0, preferred_memory=None, trace=None, parameters=None, model_version=-1, **kwargs):
        self._bls_model = _bls_model_name(model_name)
        # Triton's binding: None where a list, a str or a number goes is a TypeError; a None in the inputs is its
        # TritonModelException.
        for arg, value, ok in (("inputs", inputs, isinstance(inputs, (list, tuple)) or inputs is _MISSING),
                               ("requested_output_names", requested_output_names,
                                requested_output_names is _MISSING or (isinstance(requested_output_names, (list, tuple))
                                                                       and all(isinstance(n, str) for n in requested_output_names))),
                               ("request_id", request_id, isinstance(request_id, str)),
                               ("correlation_id", correlation_id, isinstance(correlation_id, (numbers.Integral, str))),
                               ("model_version", model_version, isinstance(model_version, numbers.Integral)),
                               ("flags", flags, isinstance(flags, numbers.Integral)),
                               ("timeout", timeout, isinstance(timeout, numbers.Integral))):
            if not ok:
                raise TypeError(_REQUEST_SIGNATURE + "Invoked with: kwargs: %s=%r\n(Backplane: %s has the wrong type: %s)"
                                % (arg, value, arg, type(value).__name__))
        inputs = [] if inputs is _MISSING else list(inputs)
        for t in inputs:
            if not isinstance(t, Tensor):
                raise TritonModelException("Input tensor must be a pb_utils.Tensor, got %s (InferenceRequest inputs)" % type(t).__name__)
        self._inputs = inputs
        self._requested = [] if requested_output_names is _MISSING else list(requested_output_names)
        self._request_id = request_id
        self._correlation_id = correlation_id
        self._parameters = _parameters_json(parameters)
        self._model_version = int(model_version)
        self._timeout = int(timeout or 0)
        self._flags = int(flags or 0)
        self._sender = None
        self._closed = False
        self._cancel = None
        self._index = -1

    def exec(self, decoupled=False):
        """BLS: runs this request on model ``model_name`` through the host and returns its response
        (with ``decoupled=True``, an iterator of its responses)."""
        import backplane_bls
        return backplane_bls.request_exec(self, decoupled)

    def async_exec(self, decoupled=False):
        """BLS from a coroutine: an awaitable of the response (with ``decoupled=True``, an async
        iterator of the responses)."""
        import backplane_bls
        return backplane_bls.request_async_exec(self, decoupled)

    def inputs(self):
        if self._index >= 0:
            _current_request.set(weakref.ref(self))
        return self._inputs

    def request_id(self):
        return self._request_id

    def correlation_id(self):
        return self._correlation_id

    def parameters(self):
        return self._parameters

    def requested_output_names(self):
        return self._requested

    def flags(self):
        """TRITONSERVER_REQUEST_FLAG_SEQUENCE_START (1) and/or _END (2) for a request of a sequence."""
        return self._flags

    def set_release_flags(self, flags):
        """TRITONSERVER_REQUEST_RELEASE_RESCHEDULE: run this request again in a later execute() (decoupled models
        whose config has sequence_batching { iterative_sequence: true }); RELEASE_ALL (the default) ends it here."""
        if flags not in (TRITONSERVER_REQUEST_RELEASE_ALL, TRITONSERVER_REQUEST_RELEASE_RESCHEDULE):
            raise TritonModelException("request release flags %r are invalid: use TRITONSERVER_REQUEST_RELEASE_ALL or "
                                       "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE" % (flags,))
        self._release_flags = flags

    def get_response_sender(self):
        if self._sender is None:
            if self._index < 0:
                raise TritonModelException("get_response_sender() is only available on requests passed to execute()")
            self._sender = InferenceResponseSender(self)
        _current_request.set(weakref.ref(self))
        return self._sender

    def is_cancelled(self):
        c = self._cancel
        return c is not None and bool(c[0] != 0)


def get_input_tensor_by_name(inference_request, name):
    for t in inference_request.inputs():
        if t.name() == name:
            return t
    return None


def get_output_tensor_by_name(inference_response, name):
    for t in inference_response.output_tensors():
        if t.name() == name:
            return t
    return None


def get_input_config_by_name(model_config, name):
    for c in model_config.get("input", []):
        if c.get("name") == name:
            return c
    return None


def get_output_config_by_name(model_config, name):
    for c in model_config.get("output", []):
        if c.get("name") == name:
            return c
    return None


def triton_to_numpy_type(data_type):
    return _TRITON_TO_NUMPY.get(data_type)


def numpy_to_triton_type(data_type):
    if data_type is np.object_ or data_type is bytes or np.dtype(data_type) == np.object_:
        return TYPE_STRING
    d = np.dtype(data_type)
    if d.kind in ("S", "U"):
        return TYPE_STRING
    return _NUMPY_TO_TRITON.get(d)


def triton_string_to_numpy(triton_type_string):
    return _TRITON_TO_NUMPY.get(_STRING_TO_TRITON.get(triton_type_string))


def serialize_byte_tensor(input_tensor):
    """Triton's BYTES serialization (4-byte little-endian length, then the bytes) as a uint8 array."""
    if input_tensor.size == 0:
        return np.empty([0], dtype=np.uint8)
    parts = []
    for obj in np.nditer(input_tensor, flags=["refs_ok"], order="C"):
        item = obj.item()
        if isinstance(item, str):
            b = item.encode("utf-8")
        elif isinstance(item, (bytes, bytearray)):
            b = bytes(item)
        else:
            b = str(item).encode("utf-8")
        parts.append(struct.pack("<I", len(b)))
        parts.append(b)
    return np.frombuffer(b"".join(parts), dtype=np.uint8)


def deserialize_bytes_tensor(encoded_tensor):
    buf = encoded_tensor.tobytes() if isinstance(encoded_tensor, np.ndarray) else bytes(encoded_tensor)
    out = []
    off = 0
    while off < len(buf):
        (n,) = struct.unpack_from("<I", buf, off)
        off += 4
        out.append(buf[off:off + n])
        off += n
    return np.array(out, dtype=np.object_)


def using_decoupled_model_transaction_policy(model_config):
    return bool(model_config.get("model_transaction_policy", {}).get("decoupled", False))


from backplane_model_config import ModelConfig  # noqa: E402  (Triton exposes it as pb_utils.ModelConfig)

# Custom metrics (Triton's pb_utils.MetricFamily); implemented next to BLS.
from backplane_bls import Metric, MetricFamily  # noqa: E402

COUNTER = MetricFamily.COUNTER
GAUGE = MetricFamily.GAUGE
HISTOGRAM = MetricFamily.HISTOGRAM
