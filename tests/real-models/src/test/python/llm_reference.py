"""Reference outputs of the zoo's tiny LLM: transformers' own model.generate(do_sample=False) on each prompt alone
(no server, no continuous batching). Prints one JSON line: a list of {"text": ..., "tokens": n, "min_gap": g}, one
per prompt: the continuation decoded as the served model decodes it (special tokens skipped), its token count, and
the smallest gap between the two highest logits over its steps (how far greedy is from a tie).

    python llm_reference.py <model dir> <max_new_tokens> <prompts.json>
prompts.json: ["prompt", ...]
"""
import json
import sys

import torch

real = torch.library.register_fake
torch.library.register_fake = lambda *a, **k: (lambda f: f)  # the index's torchvision is built for CUDA torch
try:
    try:
        import torchvision  # noqa: F401
    except ImportError:
        pass
    from transformers import AutoModelForCausalLM, AutoTokenizer
finally:
    torch.library.register_fake = real

directory, max_new_tokens, prompts = sys.argv[1], int(sys.argv[2]), sys.argv[3]
tokenizer = AutoTokenizer.from_pretrained(directory)
model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
with open(prompts) as f:
    prompts = json.load(f)
out = []
with torch.inference_mode():
    for p in prompts:
        ids = tokenizer(p, return_tensors="pt").input_ids
        g = model.generate(ids, do_sample=False, max_new_tokens=max_new_tokens, output_scores=True,
                           return_dict_in_generate=True)
        new = g.sequences[0, ids.shape[1]:].tolist()
        gaps = [float(v[0, 0] - v[0, 1]) for v in (s.topk(2).values for s in g.scores)]
        out.append({"text": tokenizer.decode(new, skip_special_tokens=True, clean_up_tokenization_spaces=False),
                    "tokens": len(new), "min_gap": min(gaps)})
print(json.dumps(out))
