#!/usr/bin/env python3
"""Generates the tiny ONNX test models of the cpu backend and their reference outputs.

Run from the repository root (needs `pip install onnx onnxruntime numpy`; CI does not: the
outputs are committed):

    python3 backends/cpu/src/test/python/generate_models.py

Writes, under backends/cpu/src/test/resources/models/ (a Triton-layout model repository; the
stateful model of the sequence tests goes to resources/sequence/ instead):
  <model>/config.pbtxt          Triton config (platform onnxruntime_onnx or backend onnxruntime)
  <model>/1/model.onnx          the model
  <model>/reference.txt         cases: inputs and the outputs ONNX Runtime (Python) computed

reference.txt format, one tensor per line, cases separated by a line `case <n>`:
  <input|output> <name> <DATATYPE> <dim,dim,...|scalar> <hex of the bytes>
where the bytes are laid out as Backplane's Tensor holds them (little-endian; BYTES elements as a
4-byte little-endian length then the bytes).
"""
import os
import struct
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "resources", "models")
BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "resources", "bench")
OPSET = [helper.make_opsetid("", 17)]
IR_VERSION = 8  # readable by every ONNX Runtime since 1.10

# datatype name -> (ONNX element type, numpy dtype used to carry the bits)
TYPES = {
    "BOOL": (TensorProto.BOOL, np.bool_),
    "UINT8": (TensorProto.UINT8, np.uint8),
    "UINT16": (TensorProto.UINT16, np.uint16),
    "UINT32": (TensorProto.UINT32, np.uint32),
    "UINT64": (TensorProto.UINT64, np.uint64),
    "INT8": (TensorProto.INT8, np.int8),
    "INT16": (TensorProto.INT16, np.int16),
    "INT32": (TensorProto.INT32, np.int32),
    "INT64": (TensorProto.INT64, np.int64),
    "FP16": (TensorProto.FLOAT16, np.float16),
    "BF16": (TensorProto.BFLOAT16, np.uint16),  # numpy has no bfloat16: carry the raw bits
    "FP32": (TensorProto.FLOAT, np.float32),
    "FP64": (TensorProto.DOUBLE, np.float64),
    "BYTES": (TensorProto.STRING, np.object_),
}
CONFIG_TYPE = {k: ("TYPE_STRING" if k == "BYTES" else "TYPE_" + k) for k in TYPES}


def save(name, graph, config, cases):
    model = helper.make_model(graph, opset_imports=OPSET, producer_name="backplane-test")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    d = os.path.join(ROOT, name)
    os.makedirs(os.path.join(d, "1"), exist_ok=True)
    path = os.path.join(d, "1", "model.onnx")
    onnx.save(model, path)
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write(config)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    with open(os.path.join(d, "reference.txt"), "w") as f:
        for i, inputs in enumerate(cases):
            f.write("case %d\n" % i)
            feeds = {}
            for n, (dt, arr) in inputs.items():
                f.write(line("input", n, dt, arr))
                feeds[n] = feed(dt, arr)
            names = [o.name for o in sess.get_outputs()]
            if any(isinstance(v, ort.OrtValue) for v in feeds.values()):
                outs = run_bf16(sess, feeds, inputs)
            else:
                outs = sess.run(names, feeds)
            for o, v in zip(sess.get_outputs(), outs):
                f.write(line("output", o.name, DT_OF_ORT[o.type], v))


def run_bf16(sess, feeds, inputs):
    """numpy has no bfloat16: bind uint16 buffers as BF16 outputs and let ONNX Runtime write the bits."""
    binding = sess.io_binding()
    for n, v in feeds.items():
        binding.bind_ortvalue_input(n, v)
    outs = []
    shape = next(iter(inputs.values()))[1].shape  # identity models: output shape = input shape
    for o in sess.get_outputs():
        buf = np.zeros(shape, dtype=np.uint16)
        binding.bind_ortvalue_output(o.name, ort.OrtValue.ortvalue_from_numpy_with_onnx_type(buf, TensorProto.BFLOAT16))
        outs.append(buf)
    sess.run_with_iobinding(binding)
    return outs


DT_OF_ORT = {
    "tensor(bool)": "BOOL", "tensor(uint8)": "UINT8", "tensor(uint16)": "UINT16", "tensor(uint32)": "UINT32",
    "tensor(uint64)": "UINT64", "tensor(int8)": "INT8", "tensor(int16)": "INT16", "tensor(int32)": "INT32",
    "tensor(int64)": "INT64", "tensor(float16)": "FP16", "tensor(bfloat16)": "BF16", "tensor(float)": "FP32",
    "tensor(double)": "FP64", "tensor(string)": "BYTES",
}


def feed(dt, arr):
    if dt == "BF16":
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(arr, TensorProto.BFLOAT16)
    return arr



def line(kind, name, dt, arr):
    arr = np.asarray(arr)
    shape = ",".join(str(d) for d in arr.shape) if arr.ndim else "scalar"
    if dt == "BYTES":
        data = b""
        for s in arr.reshape(-1):
            b = s if isinstance(s, bytes) else str(s).encode("utf-8")
            data += struct.pack("<I", len(b)) + b
    else:
        data = np.ascontiguousarray(arr.astype(arr.dtype.newbyteorder("<"))).tobytes()
    return "%s %s %s %s %s\n" % (kind, name, dt, shape, data.hex())


def vi(name, elem, dims):
    return helper.make_tensor_value_info(name, elem, dims)


def add_sub():
    g = helper.make_graph(
        [helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
         helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"])],
        "add_sub",
        [vi("INPUT0", TensorProto.FLOAT, ["batch", 4]), vi("INPUT1", TensorProto.FLOAT, ["batch", 4])],
        [vi("OUTPUT0", TensorProto.FLOAT, ["batch", 4]), vi("OUTPUT1", TensorProto.FLOAT, ["batch", 4])])
    config = """name: "add_sub"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }
]
output [
  { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] }
]
dynamic_batching { max_queue_delay_microseconds: 100 }
instance_group [ { count: 1 kind: KIND_CPU } ]
"""
    rng = np.random.default_rng(6)
    cases = []
    for rows in (1, 3):
        cases.append({"INPUT0": ("FP32", rng.standard_normal((rows, 4)).astype(np.float32)),
                      "INPUT1": ("FP32", rng.standard_normal((rows, 4)).astype(np.float32))})
    save("add_sub", g, config, cases)


def identity(dt):
    elem, np_type = TYPES[dt]
    name = "identity_" + dt.lower()
    g = helper.make_graph([helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"])], name,
                          [vi("INPUT0", elem, ["batch", "n"])], [vi("OUTPUT0", elem, ["batch", "n"])])
    config = """name: "%s"
backend: "onnxruntime"
max_batch_size: 4
input [ { name: "INPUT0" data_type: %s dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: %s dims: [ -1 ] } ]
""" % (name, CONFIG_TYPE[dt], CONFIG_TYPE[dt])
    rng = np.random.default_rng(len(dt))
    if dt == "BOOL":
        arr = np.array([[True, False, True], [False, False, True]])
    elif dt == "BYTES":
        arr = np.array([["hello", "", "wörld"], ["ünïcode ✓", "a b", "z"]], dtype=np.object_)
    elif dt == "BF16":
        f = np.array([[1.0, -2.5, 3.140625], [0.0, 65280.0, -0.0078125]], dtype=np.float32)
        arr = (f.view(np.uint32) >> 16).astype(np.uint16)
    elif dt in ("FP16", "FP32", "FP64"):
        arr = (rng.standard_normal((2, 3)) * 100).astype(np_type)
    else:
        info = np.iinfo(np_type)
        arr = np.array([[info.min, info.max, 0], [1, info.max - 1, info.min + 1]], dtype=np_type)
    save(name, g, config, [{"INPUT0": (dt, arr)}])


def dynamic_dim():
    # OUTPUT0 = INPUT0 * 2, OUTPUT1 = row sums: a dynamic non-batch dimension
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    g = helper.make_graph(
        [helper.make_node("Mul", ["INPUT0", "two"], ["OUTPUT0"]),
         helper.make_node("ReduceSum", ["INPUT0", "axes"], ["OUTPUT1"], keepdims=1)],
        "dynamic_dim",
        [vi("INPUT0", TensorProto.FLOAT, ["batch", "n"])],
        [vi("OUTPUT0", TensorProto.FLOAT, ["batch", "n"]), vi("OUTPUT1", TensorProto.FLOAT, ["batch", 1])],
        initializer=[two, axes])
    config = """name: "dynamic_dim"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [
  { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] },
  { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 1 ] }
]
dynamic_batching { }
"""
    rng = np.random.default_rng(3)
    cases = [{"INPUT0": ("FP32", rng.standard_normal((r, n)).astype(np.float32))} for r, n in ((1, 3), (2, 5), (1, 1))]
    save("dynamic_dim", g, config, cases)


def wrong_shape():
    # OUTPUT0 = INPUT0 twice along axis 1, but the graph declares it [batch, n] like INPUT0: a model whose
    # declared output shape is wrong (the backend pre-sizes outputs from declared shapes and must recover)
    g = helper.make_graph(
        [helper.make_node("Concat", ["INPUT0", "INPUT0"], ["OUTPUT0"], axis=1)],
        "wrong_shape",
        [vi("INPUT0", TensorProto.FLOAT, ["batch", "n"])],
        [vi("OUTPUT0", TensorProto.FLOAT, ["batch", "n"])])
    config = """name: "wrong_shape"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""
    save("wrong_shape", g, config, [{"INPUT0": ("FP32", np.arange(6, dtype=np.float32).reshape(2, 3))}])


def not_onnx():
    d = os.path.join(ROOT, "not_onnx")
    os.makedirs(os.path.join(d, "1"), exist_ok=True)
    with open(os.path.join(d, "1", "model.onnx"), "w") as f:
        f.write("this is not an ONNX model, just text\n")
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write('name: "not_onnx"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 0\n')


def mlp():
    """Benchmark model: 64 -> 256 (Relu) -> 64, FP32, dynamic batch. About 130 KB of weights."""
    rng = np.random.default_rng(42)
    w1 = helper.make_tensor("w1", TensorProto.FLOAT, [64, 256], (rng.standard_normal((64, 256)) * 0.1).astype(np.float32).ravel())
    w2 = helper.make_tensor("w2", TensorProto.FLOAT, [256, 64], (rng.standard_normal((256, 64)) * 0.1).astype(np.float32).ravel())
    g = helper.make_graph(
        [helper.make_node("MatMul", ["INPUT0", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("MatMul", ["r", "w2"], ["OUTPUT0"])],
        "mlp", [vi("INPUT0", TensorProto.FLOAT, ["batch", 64])], [vi("OUTPUT0", TensorProto.FLOAT, ["batch", 64])],
        initializer=[w1, w2])
    model = helper.make_model(g, opset_imports=OPSET, producer_name="backplane-bench")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    os.makedirs(os.path.join(BENCH, "mlp", "1"), exist_ok=True)
    onnx.save(model, os.path.join(BENCH, "mlp", "1", "model.onnx"))
    with open(os.path.join(BENCH, "mlp", "config.pbtxt"), "w") as f:
        f.write("""name: "mlp"
platform: "onnxruntime_onnx"
max_batch_size: 32
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 64 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 64 ] } ]
dynamic_batching { }
parameters { key: "intra_op_thread_count" value: { string_value: "1" } }
""")


def mlp_large():
    """Benchmark model with realistic compute: 512 -> 2048 (Relu) -> 512, FP32, dynamic batch.

    The 8 MB of weights are not stored: they are computed from constants (Range, Sin) that ONNX
    Runtime folds into initializers when the session loads, so the file stays tiny.
    """
    nodes = []
    inits = []

    def weight(name, rows, cols):
        inits.extend([
            helper.make_tensor(name + "_start", TensorProto.FLOAT, [], [0.0]),
            helper.make_tensor(name + "_limit", TensorProto.FLOAT, [], [float(rows * cols)]),
            helper.make_tensor(name + "_delta", TensorProto.FLOAT, [], [1.0]),
            helper.make_tensor(name + "_shape", TensorProto.INT64, [2], [rows, cols]),
            helper.make_tensor(name + "_scale", TensorProto.FLOAT, [], [0.05]),
        ])
        nodes.extend([
            helper.make_node("Range", [name + "_start", name + "_limit", name + "_delta"], [name + "_range"]),
            helper.make_node("Sin", [name + "_range"], [name + "_sin"]),
            helper.make_node("Mul", [name + "_sin", name + "_scale"], [name + "_flat"]),
            helper.make_node("Reshape", [name + "_flat", name + "_shape"], [name]),
        ])

    weight("w1", 512, 2048)
    weight("w2", 2048, 512)
    nodes.extend([helper.make_node("MatMul", ["INPUT0", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
                  helper.make_node("MatMul", ["r", "w2"], ["OUTPUT0"])])
    g = helper.make_graph(nodes, "mlp_large", [vi("INPUT0", TensorProto.FLOAT, ["batch", 512])],
                          [vi("OUTPUT0", TensorProto.FLOAT, ["batch", 512])], initializer=inits)
    model = helper.make_model(g, opset_imports=OPSET, producer_name="backplane-bench")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    os.makedirs(os.path.join(BENCH, "mlp_large", "1"), exist_ok=True)
    onnx.save(model, os.path.join(BENCH, "mlp_large", "1", "model.onnx"))
    with open(os.path.join(BENCH, "mlp_large", "config.pbtxt"), "w") as f:
        f.write("""name: "mlp_large"
platform: "onnxruntime_onnx"
max_batch_size: 32
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 512 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 512 ] } ]
dynamic_batching { }
parameters { key: "intra_op_thread_count" value: { string_value: "1" } }
""")


def sequence_accumulate():
    """A stateful model for the sequence batcher (implicit state and a control input), outside the
    reference repository: OUTPUT = STATE_IN + INPUT + 1000 * START, STATE_OUT = OUTPUT."""
    thousand = helper.make_tensor("thousand", TensorProto.FLOAT, [], [1000.0])
    g = helper.make_graph(
        [helper.make_node("Cast", ["START"], ["start_f"], to=TensorProto.FLOAT),
         helper.make_node("Mul", ["start_f", "thousand"], ["bonus"]),
         helper.make_node("Add", ["STATE_IN", "INPUT"], ["sum"]),
         helper.make_node("Add", ["sum", "bonus"], ["OUTPUT"]),
         helper.make_node("Identity", ["OUTPUT"], ["STATE_OUT"])],
        "sequence_accumulate",
        [vi("INPUT", TensorProto.FLOAT, ["batch", 1]), vi("START", TensorProto.INT32, ["batch", 1]),
         vi("STATE_IN", TensorProto.FLOAT, ["batch", 1])],
        [vi("OUTPUT", TensorProto.FLOAT, ["batch", 1]), vi("STATE_OUT", TensorProto.FLOAT, ["batch", 1])],
        initializer=[thousand])
    model = helper.make_model(g, opset_imports=OPSET, producer_name="backplane-test")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    d = os.path.join(ROOT, "..", "sequence", "accumulate")
    os.makedirs(os.path.join(d, "1"), exist_ok=True)
    onnx.save(model, os.path.join(d, "1", "model.onnx"))
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write("""name: "accumulate"
platform: "onnxruntime_onnx"
max_batch_size: 4
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
sequence_batching {
  direct { max_queue_delay_microseconds: 1000 }
  control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]
  state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ 1 ]
            initial_state: [ { name: "zeros" data_type: TYPE_FP32 dims: [ 1 ] zero_data: true } ] } ]
}
instance_group [ { count: 1 kind: KIND_CPU } ]
""")


if __name__ == "__main__":
    add_sub()
    for t in TYPES:
        identity(t)
    dynamic_dim()
    wrong_shape()
    not_onnx()
    mlp()
    mlp_large()
    sequence_accumulate()
    print("models written under", os.path.abspath(ROOT), "and", os.path.abspath(BENCH), file=sys.stderr)
