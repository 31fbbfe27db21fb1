#!/usr/bin/env python3
"""Builds the zoo's tiny LLM: a random-weight LlamaForCausalLM and its own tokenizer, made on this machine.

Nothing here is downloaded and nothing it writes is committed. Run it with the model environment's
interpreter (tools/model-env.sh prints it):

    ~/.cache/backplane/model-env/bin/python benchmarks/zoo/make_llm.py --out target/zoo-llm [--seed 0]

The output is a Hugging Face causal-LM directory, which `AutoModelForCausalLM.from_pretrained(dir)` and
`AutoTokenizer.from_pretrained(dir)` load as they would a downloaded model:

    config.json, model.safetensors    LlamaForCausalLM: hidden 128, 2 layers, 4 heads (2 key/value heads),
                                      vocabulary 2048, context 1024, float32, random weights (seed)
    generation_config.json            eos = <|im_end|> and <|end_of_text|>, greedy by default
    tokenizer.json, tokenizer_config.json, chat_template.jinja
                                      byte-level BPE trained here on the docstrings of Python's own standard
                                      library (PreTrainedTokenizerFast), with <|begin_of_text|>,
                                      <|end_of_text|>, <|pad|>, <|im_start|>, <|im_end|> and a ChatML
                                      chat template (add_generation_prompt opens the assistant's turn)

The weights are drawn with a wide `initializer_range` (0.3, where Llama's is 0.02): the logits spread over
several units, so the two highest are rarely within float noise of each other and greedy decoding picks the same
token whatever the batch around it (paged attention in a continuous batch and `generate` differ in the last bits
only; the six prompts of the tests have a smallest top-2 gap of 0.004 over 16 tokens, far above the noise). The
folder holds a `.zoo-stamp` naming what made it (this script's hash, the seed, the interpreter, the transformers
and tokenizers versions); a folder whose stamp matches is left as it is, so running the script again costs
nothing. It is built in a temporary folder and renamed into place, so an interrupted run leaves no half model
behind."""
import argparse
import hashlib
import json
import os
import shutil
import sys
import time

SCRIPT_HASH = hashlib.sha256(open(os.path.abspath(__file__), "rb").read()).hexdigest()[:16]

LLAMA = dict(vocab_size=2048, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
             initializer_range=0.3, rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False)

BOS, EOS, PAD, IM_START, IM_END = "<|begin_of_text|>", "<|end_of_text|>", "<|pad|>", "<|im_start|>", "<|im_end|>"
SPECIAL = [BOS, EOS, PAD, IM_START, IM_END]

# ChatML, as Qwen and many others write it: every message in its own im_start/im_end block; the generation
# prompt opens the assistant's block, whose end (<|im_end|>) is the model's eos.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# Modules whose docstrings are the tokenizer's training text: plain English and Python, present everywhere.
CORPUS_MODULES = ("builtins", "os", "os.path", "re", "json", "collections", "itertools", "functools", "string",
                  "textwrap", "argparse", "pathlib", "datetime", "random", "statistics", "fractions", "decimal",
                  "shutil", "subprocess", "threading", "queue", "logging", "unittest", "typing", "dataclasses",
                  "enum", "heapq", "bisect", "csv", "urllib.parse", "http.client", "email.message", "zipfile")


def corpus():
    """The training text: every docstring of CORPUS_MODULES (and their classes and functions), plus a
    little non-ASCII text so that multi-byte characters get merges of their own."""
    import importlib
    import inspect
    texts = []
    for name in CORPUS_MODULES:
        module = importlib.import_module(name)
        for obj in [module] + [v for _, v in sorted(vars(module).items())]:
            doc = inspect.getdoc(obj) if (inspect.ismodule(obj) or inspect.isclass(obj) or callable(obj)) else None
            if doc:
                texts.append(doc)
    texts += ["Grüße aus München, ça va très bien, ¿qué tal? Привет, мир! 你好，世界。こんにちは。"] * 20
    return texts


def import_transformers():
    """transformers, imported with torch.library.register_fake a no-op: transformers imports torchvision where it
    is installed, and the index's torchvision wheel is built against CUDA torch, so its native ops fail to register
    beside torch+cpu (tools/model-env.sh; the LLM uses none of them)."""
    import torch
    real = torch.library.register_fake
    torch.library.register_fake = lambda *a, **k: (lambda f: f)
    try:
        try:
            import torchvision  # noqa: F401 (once imported, transformers' lazy imports find it there)
        except ImportError:
            pass
        import transformers
        from transformers import LlamaForCausalLM, PreTrainedTokenizerFast  # noqa: F401 (the lazy imports, now)
    finally:
        torch.library.register_fake = real
    return transformers


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def build_tokenizer(out):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=LLAMA["vocab_size"], special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=IM_END, pad_token=PAD,
                                   additional_special_tokens=[EOS, IM_START], clean_up_tokenization_spaces=False,
                                   model_max_length=LLAMA["max_position_embeddings"])
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    # transformers 5 writes the template to chat_template.jinja and names its own class; the template goes into
    # tokenizer_config.json too and the class is the one every version (and non-Python readers) knows
    path = os.path.join(out, "tokenizer_config.json")
    with open(path) as f:
        config = json.load(f)
    config.update(tokenizer_class="PreTrainedTokenizerFast", chat_template=CHAT_TEMPLATE)
    with open(path, "w") as f:
        json.dump(config, f, indent=2, ensure_ascii=False)
        f.write("\n")
    return fast


def build_model(out, tokenizer, seed):
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL}
    cfg = LlamaConfig(**LLAMA, bos_token_id=ids[BOS], eos_token_id=[ids[IM_END], ids[EOS]], pad_token_id=ids[PAD])
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg).eval()
    model.generation_config = GenerationConfig(bos_token_id=ids[BOS], eos_token_id=[ids[IM_END], ids[EOS]],
                                               pad_token_id=ids[PAD], do_sample=False, max_new_tokens=256)
    model.save_pretrained(out)


def stamp_of(seed):
    import tokenizers
    import transformers
    return {"script": SCRIPT_HASH, "seed": seed, "python": sys.version.split()[0], "prefix": sys.prefix,
            "transformers": transformers.__version__, "tokenizers": tokenizers.__version__}


def files_of(folder):
    out = []
    for f in sorted(os.listdir(folder)):
        p = os.path.join(folder, f)
        if f != ".zoo-stamp" and os.path.isfile(p):
            out.append((f, os.path.getsize(p)))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="the model directory to write (e.g. target/zoo-llm); made if missing")
    p.add_argument("--seed", type=int, default=0, help="seed of the random weights (default 0)")
    p.add_argument("--force", action="store_true", help="rebuild even where the stamp matches")
    a = p.parse_args(argv)
    try:
        import torch
        import tokenizers  # noqa: F401
        import_transformers()
    except ImportError as e:
        sys.exit(f"make_llm: {e.name} is missing ({e}); run tools/model-env.sh and use the python it prints")

    dest = os.path.abspath(a.out)
    stamp = stamp_of(a.seed)
    stamp_path = os.path.join(dest, ".zoo-stamp")
    if not a.force and os.path.exists(stamp_path):
        try:
            with open(stamp_path) as f:
                current = json.load(f) == stamp
        except (OSError, ValueError):
            current = False
        if current:
            print(f"llm: up to date ({human(sum(s for _, s in files_of(dest)))}) in {dest}")
            return 0
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    started = time.monotonic()
    parent = os.path.dirname(dest)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".{os.path.basename(dest)}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        tokenizer = build_tokenizer(tmp)
        build_model(tmp, tokenizer, a.seed)
        with open(os.path.join(tmp, ".zoo-stamp"), "w") as f:
            f.write(json.dumps(stamp) + "\n")
        shutil.rmtree(dest, ignore_errors=True)
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    print(f"llm: made in {time.monotonic() - started:.1f} s in {dest}")
    for rel, size in files_of(dest):
        print(f"  {rel:<24} {human(size):>10}")
    return 0


if __name__ == "__main__":
    import warnings
    warnings.filterwarnings("ignore")
    sys.exit(main())
