#!/usr/bin/env python3
"""Builds Backplane's model zoo: real architectures with random weights, made on this machine.

Nothing here is downloaded and nothing it writes is committed. Run it with the model environment's
interpreter (tools/model-env.sh prints it):

    ~/.cache/backplane/model-env/bin/python benchmarks/zoo/make_zoo.py --out target/zoo [--size small|full]
        [--models resnet50,bert,bert_torch,resnet50_pt,bert_pt] [--seed 0] [--python-env DIR]

The output is a Triton model repository, one folder per model:

    resnet50/         torchvision ResNet-50, FP32 input [3,224,224] -> logits [1000], dynamic batch (ONNX)
    bert/             BERT-base encoder (BertConfig: 12 layers, hidden 768): INT64 input_ids and
                      attention_mask [-1] -> last_hidden_state [-1,768], pooler_output [768];
                      dynamic batch and sequence (ONNX)
    bert_torch/       the same encoder, same weights, as a python-backend model.py running torch
    resnet50_pt/      the same ResNet-50, same weights, traced to TorchScript (model.pt) for the pytorch
                      backend: INPUT__0 -> OUTPUT__0 (Triton's pytorch_libtorch naming), dynamic batch
    bert_pt/          the same encoder, same weights, traced to TorchScript: inputs input_ids and
                      attention_mask bound by forward()'s argument names, outputs
                      last_hidden_state__0 and pooler_output__1
    resnet_small/, bert_small/, bert_torch_small/, resnet_small_pt/, bert_small_pt/   with --size small: the same models, tiny
                      (ResNet of torchvision blocks with widths 8..64 at [3,64,64], 10 classes;
                      BERT with 2 layers, hidden 64, vocabulary 1000) for the tests

The ONNX and the torch encoder of one size share their weights (the same seed), so their outputs
agree. Every model folder holds a `.zoo-stamp` naming what made it; a folder whose stamp matches
(this script's hash, size, seed, interpreter) is left as it is, so running the script again costs
nothing. A model is built in a temporary folder and renamed into place, so an interrupted run leaves
no half model behind.
"""
import argparse
import hashlib
import json
import os
import shutil
import sys
import time

SCRIPT_HASH = hashlib.sha256(open(os.path.abspath(__file__), "rb").read()).hexdigest()[:16]
OPSET = 17
FAMILIES = ("resnet50", "bert", "bert_torch", "resnet50_pt", "bert_pt")
# Made when --models is not given. The TorchScript families are asked for by name (benchmarks-peers/real-models.sh
# does): a repository served whole by a host without the pytorch backend (tests/real-models) stays loadable.
DEFAULT_FAMILIES = ("resnet50", "bert", "bert_torch")

# Model names per family and size (both sizes can share one repository).
NAMES = {
    ("resnet50", "full"): "resnet50", ("resnet50", "small"): "resnet_small",
    ("bert", "full"): "bert", ("bert", "small"): "bert_small",
    ("bert_torch", "full"): "bert_torch", ("bert_torch", "small"): "bert_torch_small",
    ("resnet50_pt", "full"): "resnet50_pt", ("resnet50_pt", "small"): "resnet_small_pt",
    ("bert_pt", "full"): "bert_pt", ("bert_pt", "small"): "bert_small_pt",
}

BERT_SIZES = {
    "full": dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072, max_position_embeddings=512),
    "small": dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=128, max_position_embeddings=128),
}
RESNET_IMAGE = {"full": 224, "small": 64}
RESNET_CLASSES = {"full": 1000, "small": 10}
MAX_BATCH = {"full": 32, "small": 8}


def import_torch():
    """torch, torchvision and transformers; the index's torchvision wheel is built against CUDA torch,
    so its native ops fail to register beside torch+cpu: register_fake is a no-op during the import
    (the models use no torchvision native op). transformers imports torchvision too."""
    try:
        import torch
    except ImportError as e:
        sys.exit(f"make_zoo: torch is missing ({e}); run tools/model-env.sh and use the python it prints")
    real = torch.library.register_fake
    torch.library.register_fake = lambda *a, **k: (lambda f: f)
    try:
        import torchvision  # noqa: F401
        import transformers  # noqa: F401
        from transformers.models.bert.modeling_bert import BertModel  # noqa: F401
    finally:
        torch.library.register_fake = real
    return torch


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


# ----------------------------------------------------------------------------------------- models

def make_resnet(torch, size):
    from torchvision.models.resnet import ResNet, BasicBlock, Bottleneck, resnet50
    if size == "full":
        return resnet50(weights=None).eval()
    # A ResNet of torchvision's own blocks with small widths: conv stem, four stages of one
    # BasicBlock each (8, 16, 32, 64 channels), average pool, linear head.
    m = ResNet(BasicBlock, [1, 1, 1, 1], num_classes=RESNET_CLASSES[size])
    widths = (8, 16, 32, 64)
    m.inplanes = widths[0]
    m.conv1 = torch.nn.Conv2d(3, widths[0], kernel_size=7, stride=2, padding=3, bias=False)
    m.bn1 = torch.nn.BatchNorm2d(widths[0])
    m.layer1 = m._make_layer(BasicBlock, widths[0], 1)
    m.layer2 = m._make_layer(BasicBlock, widths[1], 1, stride=2)
    m.layer3 = m._make_layer(BasicBlock, widths[2], 1, stride=2)
    m.layer4 = m._make_layer(BasicBlock, widths[3], 1, stride=2)
    m.fc = torch.nn.Linear(widths[3], RESNET_CLASSES[size])
    del Bottleneck
    return m.eval()


def bert_config(size):
    from transformers import BertConfig
    cfg = BertConfig(**BERT_SIZES[size])
    # eager attention: traces to plain MatMul/Softmax with the additive mask, exports everywhere
    cfg._attn_implementation = "eager"
    return cfg


def make_bert(torch, size, seed):
    from transformers.models.bert.modeling_bert import BertModel
    torch.manual_seed(seed)
    return BertModel(bert_config(size), add_pooling_layer=True).eval()


class BertOutputs:
    """Wraps BertModel so that it returns (last_hidden_state, pooler_output) — the exported outputs."""

    @staticmethod
    def wrap(torch, bert):
        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.bert = bert

            def forward(self, input_ids, attention_mask):
                o = self.bert(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
                return o.last_hidden_state, o.pooler_output
        return Wrapped().eval()


# ------------------------------------------------------------------------------------ config.pbtxt

def resnet_config(name, size, platform="onnxruntime_onnx", inp="input", out="logits", fmt=" format: FORMAT_NCHW"):
    """The ResNet-50 config: ONNX's tensor names by default; TorchScript's (INPUT__0, OUTPUT__0) through resnet_pt_config."""
    img = RESNET_IMAGE[size]
    classes = RESNET_CLASSES[size]
    return f'''name: "{name}"
platform: "{platform}"
max_batch_size: {MAX_BATCH[size]}
input [
  {{ name: "{inp}" data_type: TYPE_FP32{fmt} dims: [ 3, {img}, {img} ] }}
]
output [
  {{ name: "{out}" data_type: TYPE_FP32 dims: [ {classes} ] }}
]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
dynamic_batching {{
  preferred_batch_size: [ 4, 8 ]
  max_queue_delay_microseconds: 2000
}}
model_warmup [
  {{
    name: "random_image"
    batch_size: 1
    inputs {{ key: "{inp}" value: {{ data_type: TYPE_FP32 dims: [ 3, {img}, {img} ] random_data: true }} }}
  }}
]
'''


def resnet_pt_config(name, size):
    return resnet_config(name, size, platform="pytorch_libtorch", inp="INPUT__0", out="OUTPUT__0", fmt="")


def bert_pt_config_pbtxt(name, size):
    h = BERT_SIZES[size]["hidden_size"]
    return f'''name: "{name}"
platform: "pytorch_libtorch"
max_batch_size: {MAX_BATCH[size]}
input [
  {{ name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] }},
  {{ name: "attention_mask" data_type: TYPE_INT64 dims: [ -1 ] }}
]
output [
  {{ name: "last_hidden_state__0" data_type: TYPE_FP32 dims: [ -1, {h} ] }},
  {{ name: "pooler_output__1" data_type: TYPE_FP32 dims: [ {h} ] }}
]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
dynamic_batching {{
  max_queue_delay_microseconds: 2000
}}
{bert_warmup()}
'''


def bert_io(size):
    h = BERT_SIZES[size]["hidden_size"]
    return f'''input [
  {{ name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] }},
  {{ name: "attention_mask" data_type: TYPE_INT64 dims: [ -1 ] }}
]
output [
  {{ name: "last_hidden_state" data_type: TYPE_FP32 dims: [ -1, {h} ] }},
  {{ name: "pooler_output" data_type: TYPE_FP32 dims: [ {h} ] }}
]'''


def bert_warmup():
    # zero_data: token 0 and mask 0 everywhere are valid inputs (random_data would draw ids past the vocabulary)
    return '''model_warmup [
  {
    name: "sixteen_tokens"
    batch_size: 1
    inputs { key: "input_ids" value: { data_type: TYPE_INT64 dims: [ 16 ] zero_data: true } }
    inputs { key: "attention_mask" value: { data_type: TYPE_INT64 dims: [ 16 ] zero_data: true } }
  }
]'''


def bert_config_pbtxt(name, size):
    return f'''name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: {MAX_BATCH[size]}
{bert_io(size)}
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
dynamic_batching {{
  max_queue_delay_microseconds: 2000
}}
{bert_warmup()}
'''


def bert_torch_config_pbtxt(name, size, env):
    env_param = ""
    if env:
        env_param = f'''parameters {{
  key: "EXECUTION_ENV_PATH"
  value: {{ string_value: "{env}" }}
}}
'''
    return f'''name: "{name}"
backend: "python"
max_batch_size: {MAX_BATCH[size]}
{bert_io(size)}
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
dynamic_batching {{
  max_queue_delay_microseconds: 2000
}}
{env_param}{bert_warmup()}
'''


MODEL_PY = '''# The zoo's BERT encoder for the python backend (Triton's python_backend API): loads the weights
# and BertConfig that make_zoo.py saved beside this file and runs transformers' BertModel under
# torch.inference_mode(). Inputs and outputs are those of the zoo's ONNX encoder (same weights).
# Requests of one batch with the same sequence length run as one forward pass; different lengths
# run separately (no padding, so every output is exactly what the request alone would give). A bad
# request (shapes that differ, a token id outside the vocabulary) gets its own error response.
import json
import os

import numpy as np
import torch
import triton_python_backend_utils as pb_utils


def _import_bert():
    # The index's torchvision wheel (imported by transformers) is built against CUDA torch: its
    # native ops fail to register beside torch+cpu; the encoder uses none of them.
    real = torch.library.register_fake
    torch.library.register_fake = lambda *a, **k: (lambda f: f)
    try:
        from transformers import BertConfig
        from transformers.models.bert.modeling_bert import BertModel
    finally:
        torch.library.register_fake = real
    return BertConfig, BertModel


class TritonPythonModel:
    def initialize(self, args):
        here = os.path.join(args["model_repository"], args["model_version"])
        BertConfig, BertModel = _import_bert()
        with open(os.path.join(here, "bert_config.json")) as f:
            cfg = BertConfig(**json.load(f))
        cfg._attn_implementation = "eager"
        params = json.loads(args["model_config"]).get("parameters", {})
        threads = params.get("torch_threads", {}).get("string_value")
        if threads:
            torch.set_num_threads(int(threads))
        self.model = BertModel(cfg, add_pooling_layer=True)
        self.model.load_state_dict(torch.load(os.path.join(here, "weights.pt"), weights_only=True))
        self.model.eval()

    def execute(self, requests):
        responses = [None] * len(requests)
        groups = {}
        vocabulary = self.model.config.vocab_size
        for i, r in enumerate(requests):
            ids = pb_utils.get_input_tensor_by_name(r, "input_ids").as_numpy()
            mask = pb_utils.get_input_tensor_by_name(r, "attention_mask").as_numpy()
            if ids.shape != mask.shape:
                responses[i] = self._error(f"input_ids shape {list(ids.shape)} differs from attention_mask shape {list(mask.shape)}")
            elif ids.size and (ids.min() < 0 or ids.max() >= vocabulary):
                bad = int(ids.max()) if ids.max() >= vocabulary else int(ids.min())
                responses[i] = self._error(f"input_ids holds token id {bad}, outside the vocabulary of {vocabulary} tokens")
            else:
                groups.setdefault(ids.shape[1:], []).append((i, ids, mask))
        with torch.inference_mode():
            for members in groups.values():
                try:
                    self._run(members, responses)
                except Exception:
                    if len(members) == 1:
                        raise
                    for member in members:  # a failure ends only the request that causes it
                        try:
                            self._run([member], responses)
                        except Exception as e:
                            responses[member[0]] = self._error(f"{type(e).__name__}: {e}")
        return responses

    @staticmethod
    def _error(message):
        return pb_utils.InferenceResponse(error=pb_utils.TritonError(message))

    def _run(self, members, responses):
        ids = torch.from_numpy(np.concatenate([m[1] for m in members]))
        mask = torch.from_numpy(np.concatenate([m[2] for m in members]))
        out = self.model(input_ids=ids, attention_mask=mask, return_dict=True)
        hidden = out.last_hidden_state.numpy()
        pooled = out.pooler_output.numpy()
        at = 0
        for i, one, _ in members:
            n = one.shape[0]
            responses[i] = pb_utils.InferenceResponse([
                pb_utils.Tensor("last_hidden_state", np.ascontiguousarray(hidden[at:at + n])),
                pb_utils.Tensor("pooler_output", np.ascontiguousarray(pooled[at:at + n]))])
            at += n
'''


# -------------------------------------------------------------------------------------- building

def export_onnx(torch, module, args, path, input_names, output_names, dynamic_axes):
    torch.onnx.export(module, args, path, dynamo=False, opset_version=OPSET, do_constant_folding=True,
                      input_names=input_names, output_names=output_names, dynamic_axes=dynamic_axes)
    import onnx
    onnx.checker.check_model(path)


def build_resnet(torch, tmp, name, size, seed):
    torch.manual_seed(seed)
    model = make_resnet(torch, size)
    img = RESNET_IMAGE[size]
    os.makedirs(os.path.join(tmp, "1"))
    export_onnx(torch, model, (torch.randn(2, 3, img, img),), os.path.join(tmp, "1", "model.onnx"),
                ["input"], ["logits"], {"input": {0: "batch"}, "logits": {0: "batch"}})
    write(os.path.join(tmp, "config.pbtxt"), resnet_config(name, size))


def bert_example(torch, size):
    ids = torch.randint(0, BERT_SIZES[size]["vocab_size"], (2, 8))
    mask = torch.ones(2, 8, dtype=torch.int64)
    mask[1, 5:] = 0  # a padded row, so that no "mask is all ones" shortcut is traced
    return ids, mask


def build_bert(torch, tmp, name, size, seed):
    bert = make_bert(torch, size, seed)
    os.makedirs(os.path.join(tmp, "1"))
    export_onnx(torch, BertOutputs.wrap(torch, bert), bert_example(torch, size), os.path.join(tmp, "1", "model.onnx"),
                ["input_ids", "attention_mask"], ["last_hidden_state", "pooler_output"],
                {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
                 "last_hidden_state": {0: "batch", 1: "sequence"}, "pooler_output": {0: "batch"}})
    write(os.path.join(tmp, "config.pbtxt"), bert_config_pbtxt(name, size))


def build_resnet_pt(torch, tmp, name, size, seed):
    torch.manual_seed(seed)
    model = make_resnet(torch, size)  # the ONNX ResNet's weights: same seed
    img = RESNET_IMAGE[size]
    os.makedirs(os.path.join(tmp, "1"))
    with torch.no_grad():
        traced = torch.jit.trace(model, (torch.randn(2, 3, img, img),))
    traced.save(os.path.join(tmp, "1", "model.pt"))
    write(os.path.join(tmp, "config.pbtxt"), resnet_pt_config(name, size))


def build_bert_pt(torch, tmp, name, size, seed):
    bert = make_bert(torch, size, seed)
    os.makedirs(os.path.join(tmp, "1"))
    with torch.no_grad():
        traced = torch.jit.trace(BertOutputs.wrap(torch, bert), bert_example(torch, size), check_trace=False, strict=False)
    traced.save(os.path.join(tmp, "1", "model.pt"))
    write(os.path.join(tmp, "config.pbtxt"), bert_pt_config_pbtxt(name, size))


def build_bert_torch(torch, tmp, name, size, seed, env):
    bert = make_bert(torch, size, seed)
    version = os.path.join(tmp, "1")
    os.makedirs(version)
    torch.save(bert.state_dict(), os.path.join(version, "weights.pt"))
    write(os.path.join(version, "bert_config.json"), json.dumps(BERT_SIZES[size], indent=2) + "\n")
    write(os.path.join(version, "model.py"), MODEL_PY)
    write(os.path.join(tmp, "config.pbtxt"), bert_torch_config_pbtxt(name, size, env))


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def stamp_of(family, size, seed, env):
    return {"script": SCRIPT_HASH, "family": family, "size": size, "seed": seed, "opset": OPSET,
            "python_env": env or ""}


def files_of(folder):
    out = []
    for root, _, files in os.walk(folder):
        for f in sorted(files):
            if f == ".zoo-stamp":
                continue
            p = os.path.join(root, f)
            out.append((os.path.relpath(p, folder), os.path.getsize(p)))
    return sorted(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="model repository to write (e.g. target/zoo); made if missing")
    p.add_argument("--size", choices=("small", "full"), default="full")
    p.add_argument("--models", default=",".join(DEFAULT_FAMILIES),
                   help=f"comma-separated families out of {','.join(FAMILIES)} (default: {','.join(DEFAULT_FAMILIES)})")
    p.add_argument("--seed", type=int, default=0, help="seed of the random weights (default 0)")
    p.add_argument("--python-env", default=sys.prefix,
                   help="EXECUTION_ENV_PATH written into the torch model's config.pbtxt: the environment whose "
                        "python runs model.py (default: this interpreter's, %(default)s); '' writes none")
    p.add_argument("--force", action="store_true", help="rebuild even where the stamp matches")
    a = p.parse_args(argv)

    families = [f.strip() for f in a.models.split(",") if f.strip()]
    unknown = [f for f in families if f not in FAMILIES]
    if unknown or not families:
        p.error(f"unknown model family {unknown or a.models!r}; choose from {', '.join(FAMILIES)}")
    os.makedirs(a.out, exist_ok=True)
    torch = None
    for family in families:
        name = NAMES[(family, a.size)]
        dest = os.path.join(a.out, name)
        env = a.python_env if family == "bert_torch" else ""
        stamp = stamp_of(family, a.size, a.seed, env)
        stamp_path = os.path.join(dest, ".zoo-stamp")
        if not a.force and os.path.exists(stamp_path):
            try:
                with open(stamp_path) as f:
                    current = json.load(f) == stamp
            except (OSError, ValueError):
                current = False
            if current:
                total = sum(s for _, s in files_of(dest))
                print(f"{name}: up to date ({human(total)}) in {dest}")
                continue
        if torch is None:
            torch = import_torch()
            torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
        started = time.monotonic()
        tmp = os.path.join(a.out, f".{name}.tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        try:
            if family == "resnet50":
                build_resnet(torch, tmp, name, a.size, a.seed)
            elif family == "bert":
                build_bert(torch, tmp, name, a.size, a.seed)
            elif family == "resnet50_pt":
                build_resnet_pt(torch, tmp, name, a.size, a.seed)
            elif family == "bert_pt":
                build_bert_pt(torch, tmp, name, a.size, a.seed)
            else:
                build_bert_torch(torch, tmp, name, a.size, a.seed, env)
            write(os.path.join(tmp, ".zoo-stamp"), json.dumps(stamp) + "\n")
            shutil.rmtree(dest, ignore_errors=True)
            os.rename(tmp, dest)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        print(f"{name}: made in {time.monotonic() - started:.1f} s in {dest}")
        for rel, size in files_of(dest):
            print(f"  {rel:<24} {human(size):>10}")
    return 0


if __name__ == "__main__":
    import warnings
    warnings.filterwarnings("ignore")
    sys.exit(main())
