"""Reference outputs of the zoo's torch BERT: BertModel with the weights make_zoo.py saved, run by torch
directly on each request alone (no server, no batching). Prints one JSON line: a list of
{"last_hidden_state": [...], "pooler_output": [...]} (flattened), one per request.

    python torch_reference.py <bert_torch version dir> <inputs.json>
inputs.json: [{"input_ids": {"shape": [b, s], "data": [...]}, "attention_mask": {...}}, ...]
"""
import json
import os
import sys

import torch

real = torch.library.register_fake
torch.library.register_fake = lambda *a, **k: (lambda f: f)  # the index's torchvision is built for CUDA torch
try:
    from transformers import BertConfig
    from transformers.models.bert.modeling_bert import BertModel
finally:
    torch.library.register_fake = real

here, inputs = sys.argv[1], sys.argv[2]
with open(os.path.join(here, "bert_config.json")) as f:
    cfg = BertConfig(**json.load(f))
cfg._attn_implementation = "eager"
model = BertModel(cfg, add_pooling_layer=True)
model.load_state_dict(torch.load(os.path.join(here, "weights.pt"), weights_only=True))
model.eval()
out = []
with open(inputs) as f:
    requests = json.load(f)
with torch.inference_mode():
    for r in requests:
        t = {k: torch.tensor(v["data"], dtype=torch.int64).reshape(v["shape"]) for k, v in r.items()}
        o = model(input_ids=t["input_ids"], attention_mask=t["attention_mask"], return_dict=True)
        out.append({"last_hidden_state": o.last_hidden_state.flatten().tolist(), "pooler_output": o.pooler_output.flatten().tolist()})
print(json.dumps(out))
