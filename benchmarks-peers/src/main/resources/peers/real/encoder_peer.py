# The zoo's BERT encoder for the HTTP peers and DJL's Python engine (RealModelsBenchmark): loads
# bert_config.json and weights.pt from a zoo version folder exactly as the zoo's model.py does and
# runs transformers' BertModel under torch.inference_mode(). Wire format of every peer: the body is
# input_ids then attention_mask, INT64 little-endian, shape [1, n]; the answer is last_hidden_state
# then pooler_output, FP32 little-endian.
import json
import os

import numpy as np
import torch


def load(settings_path):
    """The encoder named by a settings.json ({"version_dir": ..., "threads": N})."""
    with open(settings_path) as f:
        s = json.load(f)
    torch.set_num_threads(int(s["threads"]))
    real = torch.library.register_fake  # see the zoo's model.py: torchvision's wheel is built for CUDA torch
    torch.library.register_fake = lambda *a, **k: (lambda f: f)
    try:
        from transformers import BertConfig
        from transformers.models.bert.modeling_bert import BertModel
    finally:
        torch.library.register_fake = real
    with open(os.path.join(s["version_dir"], "bert_config.json")) as f:
        cfg = BertConfig(**json.load(f))
    cfg._attn_implementation = "eager"
    model = BertModel(cfg, add_pooling_layer=True)
    model.load_state_dict(torch.load(os.path.join(s["version_dir"], "weights.pt"), weights_only=True))
    return model.eval()


def run(model, body):
    """One request: the wire body in, the wire answer out."""
    both = np.frombuffer(body, dtype="<i8")
    n = both.size // 2
    ids = torch.from_numpy(both[:n].reshape(1, n).copy())
    mask = torch.from_numpy(both[n:].reshape(1, n).copy())
    with torch.inference_mode():
        out = model(input_ids=ids, attention_mask=mask, return_dict=True)
    return out.last_hidden_state.numpy().astype("<f4").tobytes() + out.pooler_output.numpy().astype("<f4").tobytes()
