#!/usr/bin/env python3
"""Generates tiny stand-ins for the models of Triton's quick-start repository.

Run from the repository root (needs `pip install onnx numpy`; CI does not: the outputs are
committed):

    python3 backends/cpu/src/test/python/generate_quickstart_models.py

Writes, under backends/cpu/src/test/resources/quickstart/ (a Triton-layout model repository):
  densenet_onnx/config.pbtxt        Triton's quick-start config, unchanged
  densenet_onnx/densenet_labels.txt 1000 labels
  densenet_onnx/1/model.onnx        data_0 [1,3,224,224] -> fc6_1 [1,1000,1,1]: the mean of each
                                    colour channel c lands on class 100 + 200 * c (0: 100, 1: 300,
                                    2: 500); every other class is 0
  inception_graphdef/config.pbtxt   Triton's quick-start config with one line changed: platform
                                    onnxruntime_onnx instead of tensorflow_graphdef
  inception_graphdef/inception_labels.txt 1001 labels
  inception_graphdef/1/model.onnx   input [-1,299,299,3] -> InceptionV3/Predictions/Softmax
                                    [-1,1001]: softmax over classes where the mean of colour channel c
                                    is the logit of class 10 * (c + 1)
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "resources", "quickstart")
OPSET = [helper.make_opsetid("", 17)]
IR_VERSION = 8  # readable by every ONNX Runtime since 1.10

DENSENET_CONFIG = """name: "densenet_onnx"
platform: "onnxruntime_onnx"
max_batch_size : 0
input [
  {
    name: "data_0"
    data_type: TYPE_FP32
    format: FORMAT_NCHW
    dims: [ 3, 224, 224 ]
    reshape { shape: [ 1, 3, 224, 224 ] }
  }
]
output [
  {
    name: "fc6_1"
    data_type: TYPE_FP32
    dims: [ 1000 ]
    reshape { shape: [ 1, 1000, 1, 1 ] }
    label_filename: "densenet_labels.txt"
  }
]
"""

INCEPTION_CONFIG = """name: "inception_graphdef"
platform: "onnxruntime_onnx"
max_batch_size: 128
input [
  {
    name: "input"
    data_type: TYPE_FP32
    format: FORMAT_NHWC
    dims: [ 299, 299, 3 ]
  }
]
output [
  {
    name: "InceptionV3/Predictions/Softmax"
    data_type: TYPE_FP32
    dims: [ 1001 ]
    label_filename: "inception_labels.txt"
  }
]
"""


def save(name, graph, config, labels):
    model = helper.make_model(graph, opset_imports=OPSET, producer_name="backplane-test")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    d = os.path.join(ROOT, name)
    os.makedirs(os.path.join(d, "1"), exist_ok=True)
    onnx.save(model, os.path.join(d, "1", "model.onnx"))
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write(config)
    with open(os.path.join(d, labels[0]), "w") as f:
        f.write("".join(label + "\n" for label in labels[1]))


def densenet():
    w = np.zeros((1000, 3, 1, 1), dtype=np.float32)
    for c in range(3):
        w[100 + 200 * c, c, 0, 0] = 1.0
    graph = helper.make_graph(
        [
            helper.make_node("ReduceMean", ["data_0"], ["mean"], axes=[2, 3], keepdims=1),
            helper.make_node("Conv", ["mean", "W"], ["fc6_1"]),
        ],
        "densenet_standin",
        [helper.make_tensor_value_info("data_0", TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info("fc6_1", TensorProto.FLOAT, [1, 1000, 1, 1])],
        [numpy_helper.from_array(w, "W")],
    )
    save("densenet_onnx", graph, DENSENET_CONFIG, ("densenet_labels.txt", ["DENSENET CLASS %d" % i for i in range(1000)]))


def inception():
    w = np.zeros((3, 1001), dtype=np.float32)
    for c in range(3):
        w[c, 10 * (c + 1)] = 1.0
    out = "InceptionV3/Predictions/Softmax"
    graph = helper.make_graph(
        [
            helper.make_node("ReduceMean", ["input"], ["mean"], axes=[1, 2], keepdims=0),
            helper.make_node("MatMul", ["mean", "W"], ["logits"]),
            helper.make_node("Softmax", ["logits"], [out], axis=1),
        ],
        "inception_standin",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 299, 299, 3])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["batch", 1001])],
        [numpy_helper.from_array(w, "W")],
    )
    save("inception_graphdef", graph, INCEPTION_CONFIG, ("inception_labels.txt", ["INCEPTION CLASS %d" % i for i in range(1001)]))


if __name__ == "__main__":
    densenet()
    inception()
