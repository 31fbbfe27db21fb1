# A TorchScript export (torch.jit.trace) of the zoo's BERT encoder, for DJL's PyTorch engine:
# the same BertConfig and weights.pt as the zoo's model.py, returning (last_hidden_state, pooler_output).
#   python torchscript.py <zoo version folder> <out.pt>
import json
import sys

import torch

import encoder_peer

version_dir, out = sys.argv[1], sys.argv[2]
settings = out + ".settings.json"
with open(settings, "w") as f:
    json.dump({"version_dir": version_dir, "threads": 1}, f)
model = encoder_peer.load(settings)
cfg = json.load(open(version_dir + "/bert_config.json"))


class Wrapped(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bert = model

    def forward(self, input_ids, attention_mask):
        o = self.bert(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
        return o.last_hidden_state, o.pooler_output


ids = torch.randint(0, cfg["vocab_size"], (2, 8))
mask = torch.ones(2, 8, dtype=torch.int64)
mask[1, 5:] = 0
with torch.no_grad():
    traced = torch.jit.trace(Wrapped().eval(), (ids, mask), check_trace=False, strict=False)
traced.save(out)
print("torchscript:", out)
