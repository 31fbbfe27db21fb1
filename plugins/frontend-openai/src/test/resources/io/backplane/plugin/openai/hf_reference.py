"""The reference the ChatTemplate/TokenCounter tests compare with: transformers itself.

usage: python hf_reference.py SPEC.json OUT.json

SPEC: {"dir": folder for the tokenizers,
       "tokenizers": [{"name", "template" (str or {name: str}), "layout": "jinja"|"config"|"config-list",
                       "special": {bos_token: ..., ...}, "bos_post_processor": bool}],
       "cases": [{"tokenizer", "messages", "tools" (or null), "add_generation_prompt"}],
       "counts": [{"tokenizer", "text"}],
       "strftime": {"epoch_seconds": int, "formats": [...]}}
OUT:  {"renders": [{"ok": str} | {"error": str}], "counts": [[without, with special tokens]], "strftime": [...]}
Everything is made locally: a tiny byte-level BPE trained on a few sentences, no download.
"""
import json, os, sys
from datetime import datetime, timezone

from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers, processors
from transformers import AutoTokenizer, PreTrainedTokenizerFast

spec = json.load(open(sys.argv[1], encoding="utf-8"))
CORPUS = [
    "Hello world, this is a tiny corpus for a tiny tokenizer.",
    "The quick brown fox jumps over the lazy dog. Conversation roles must alternate!",
    "héllo 世界 🚀 — ‘quotes’ \"double\" and 'single'\n\tindented\\backslash",
    "You are a helpful assistant. What is the weather in Paris today? It is sunny.",
] * 20


def build(t):
    special = t.get("special", {})
    added = sorted({v for v in special.values()} | set(t.get("extra_tokens", [])))
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=added,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    if t.get("bos_post_processor"):
        bos = special["bos_token"]
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, tok.token_to_id(bos))])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, **special)
    template = t["template"]
    out = os.path.join(spec["dir"], t["name"])
    os.makedirs(out, exist_ok=True)
    if t["layout"] == "jinja":
        fast.chat_template = template
        fast.save_pretrained(out)
    else:
        fast.save_pretrained(out)
        cfg_path = os.path.join(out, "tokenizer_config.json")
        cfg = json.load(open(cfg_path, encoding="utf-8"))
        if t["layout"] == "config-list":
            cfg["chat_template"] = [{"name": k, "template": v} for k, v in template.items()]
        else:
            cfg["chat_template"] = template
        json.dump(cfg, open(cfg_path, "w", encoding="utf-8"), ensure_ascii=False, indent=2)
    # the reference is what the saved files mean to transformers
    return AutoTokenizer.from_pretrained(out)


toks = {t["name"]: build(t) for t in spec["tokenizers"]}
renders = []
for c in spec["cases"]:
    tok = toks[c["tokenizer"]]
    try:
        kw = {"tools": c["tools"]} if c.get("tools") is not None else {}
        renders.append({"ok": tok.apply_chat_template(c["messages"], tokenize=False,
                                                      add_generation_prompt=c["add_generation_prompt"], **kw)})
    except Exception as e:  # raise_exception's TemplateError, or a template's own failure
        renders.append({"error": f"{type(e).__name__}: {e}"})
counts = []
for c in spec.get("counts", []):
    tok = toks[c["tokenizer"]]
    counts.append([len(tok(c["text"], add_special_tokens=False).input_ids),
                   len(tok(c["text"], add_special_tokens=True).input_ids)])
st = spec.get("strftime")
strf = []
if st:
    when = datetime.fromtimestamp(st["epoch_seconds"], tz=timezone.utc)
    strf = [when.strftime(f) for f in st["formats"]]
json.dump({"renders": renders, "counts": counts, "strftime": strf}, open(sys.argv[2], "w", encoding="utf-8"),
          ensure_ascii=False)
