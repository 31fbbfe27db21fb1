"""Makes the TorchScript test models and their expected outputs (run at test time, never committed).

    make_models.py <out>

For each model: <out>/<name>/model.pt, inputs <out>/<name>/in_<i>.bin and expected outputs
<out>/<name>/out_<i>.bin (raw little-endian bytes of torch.jit.load(model.pt)(*inputs)), and
<out>/<name>/shapes.txt (one line per tensor: in_<i> or out_<i>, dtype, shape).
"""
import os
import sys

import torch

torch.manual_seed(0)
OUT = sys.argv[1]


class Echo(torch.nn.Module):
    """The conformance model: x * 2 + 1; a row below -1000 raises (the kit's failing request)."""

    def forward(self, x):
        if bool((x < -1000.0).any()):
            raise RuntimeError("echo: a value below -1000")
        return x * 2 + 1


class TinyConv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4 * 8 * 8, 5)

    def forward(self, image):
        y = torch.relu(self.bn(self.conv(image)))
        return torch.softmax(self.fc(y.flatten(1)), dim=1)


class TwoInputs(torch.nn.Module):
    """forward(tokens, scale): inputs bound by these names, whatever their order in config.pbtxt."""

    def forward(self, tokens, scale):
        return tokens.to(torch.float32) * scale


class TupleOut(torch.nn.Module):
    """Three outputs: a sum, the input transposed (not contiguous) and an int64 argmax."""

    def forward(self, x):
        return x.sum(dim=1), x.transpose(1, 2), x.argmax(dim=2)


def save(name, module, inputs, script=False):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    module.eval()
    m = torch.jit.script(module) if script else torch.jit.trace(module, inputs)
    path = os.path.join(d, "model.pt")
    m.save(path)
    loaded = torch.jit.load(path)
    with torch.no_grad():
        out = loaded(*inputs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    with open(os.path.join(d, "shapes.txt"), "w") as f:
        for prefix, ts in (("in", inputs), ("out", outs)):
            for i, t in enumerate(ts):
                t = t.contiguous()
                with open(os.path.join(d, "%s_%d.bin" % (prefix, i)), "wb") as b:
                    b.write(t.numpy().astype(t.numpy().dtype.newbyteorder("<")).tobytes())
                f.write("%s_%d %s %s\n" % (prefix, i, str(t.dtype).replace("torch.", ""), ",".join(str(s) for s in t.shape)))


save("echo", Echo(), (torch.ones(1, 4),), script=True)
tiny = TinyConv()
tiny.eval()
with torch.no_grad():
    tiny.bn.running_mean.uniform_(-0.5, 0.5)
    tiny.bn.running_var.uniform_(0.5, 1.5)
save("tiny_conv", tiny, (torch.randn(3, 3, 8, 8),))
save("two_inputs", TwoInputs(), (torch.randint(0, 1000, (2, 5), dtype=torch.int64), torch.rand(2, 5)))
save("tuple_out", TupleOut(), (torch.randn(2, 3, 4),))
print("made", sorted(os.listdir(OUT)))
