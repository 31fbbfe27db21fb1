#!/usr/bin/env python3
"""The floor of benchmarks-peers/llm-peers.sh: transformers called in this process, no server, no HTTP.

Measured as `backplane bench --openai-url` measures a server (docs/benchmarks.md, "Generation"): at each
concurrency `c`, `c` closed-loop streams of the same prompt, greedy, `--max-tokens` each; a request counts when it
ends inside the measured window (after `--warmup-s`); TTFT is from submitting a request to its first generated token,
ITL the time between two token deliveries divided by the tokens they carried, output tokens/s the tokens of the
counted requests per second of the window. Two ways of calling transformers:

    generate   model.generate(do_sample=False) with a streamer that timestamps every token (one stream at a time,
               so only at concurrency 1)
    cb         the continuous-batching manager (model.init_continuous_batching(), greedy), every stream's requests
               added to it and its outputs taken from its queue by one thread that adds the next request at once

The prompt is the chat template's rendering of one user message (`--endpoint chat`) or the raw text (`completions`),
tokenized as the servers tokenize it. Prints one JSON object per (way, concurrency) on its own line.

    floor.py --model-dir target/zoo-llm --max-tokens 64 --concurrency 1,8 --duration-s 20 --warmup-s 3 --threads 1
"""
import argparse
import json
import queue
import threading
import time


def import_transformers():
    """transformers with torch.library.register_fake a no-op while torchvision is imported (the index's torchvision
    is built against CUDA torch; see tools/model-env.sh)."""
    import torch
    real = torch.library.register_fake
    torch.library.register_fake = lambda *a, **k: (lambda f: f)
    try:
        try:
            import torchvision  # noqa: F401
        except ImportError:
            pass
        import transformers
    finally:
        torch.library.register_fake = real
    return torch, transformers


def percentile(values, p):
    """Nearest-rank percentile, as the bench computes it; None for no values."""
    if not values:
        return None
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(-(-p * len(s) // 100)) - 1))
    return s[k]


class Window:
    """Collects finished requests: (start, first token, token times with their counts, end, tokens)."""

    def __init__(self, warmup_s, duration_s):
        self.begin = time.perf_counter() + warmup_s
        self.end = self.begin + duration_s
        self.requests = []

    def open(self):
        return time.perf_counter() < self.end

    def finish(self, start, deliveries):
        """deliveries: [(time, tokens)] of one request, in order."""
        end = deliveries[-1][0] if deliveries else time.perf_counter()
        if self.begin <= end <= self.end:
            self.requests.append((start, deliveries))

    def figures(self, way, concurrency, max_tokens):
        ttft, itl, tokens = [], [], 0
        for start, deliveries in self.requests:
            firsts = [t for t, n in deliveries if n > 0]
            if firsts:
                ttft.append((firsts[0] - start) * 1e3)
            previous = None
            for t, n in deliveries:
                if n <= 0:
                    continue
                if previous is not None:
                    itl.extend([(t - previous) * 1e3 / n] * n)
                previous = t
                tokens += n
        seconds = self.end - self.begin
        r = lambda v: None if v is None else round(v, 3)
        return {"way": way, "concurrency": concurrency, "requests": len(self.requests),
                "requests_per_s": r(len(self.requests) / seconds), "output_tokens_per_s": r(tokens / seconds),
                "ttft_p50_ms": r(percentile(ttft, 50)), "ttft_p99_ms": r(percentile(ttft, 99)),
                "itl_p50_ms": r(percentile(itl, 50)), "itl_p99_ms": r(percentile(itl, 99)),
                "mean_output_tokens": r(tokens / len(self.requests)) if self.requests else None,
                "max_tokens": max_tokens, "seconds": r(seconds)}


def run_generate(torch, model, ids, eos, max_tokens, window):
    from transformers.generation.streamers import BaseStreamer

    class Stamps(BaseStreamer):
        def __init__(self):
            self.times = []
            self.prompt_seen = False

        def put(self, value):
            if not self.prompt_seen:  # generate() puts the prompt first
                self.prompt_seen = True
                return
            self.times.append((time.perf_counter(), int(value.numel())))

        def end(self):
            pass

    inputs = torch.tensor([ids])
    mask = torch.ones_like(inputs)
    with torch.inference_mode():
        while window.open():
            streamer = Stamps()
            start = time.perf_counter()
            model.generate(inputs, attention_mask=mask, do_sample=False, max_new_tokens=max_tokens,
                           eos_token_id=eos, pad_token_id=eos[0] if isinstance(eos, list) else eos, streamer=streamer)
            window.finish(start, streamer.times)


def run_cb(manager, ids, eos, max_tokens, concurrency, window):
    started, deliveries, counted = {}, {}, {}
    counter = [0]

    def submit():
        counter[0] += 1
        rid = f"floor-{counter[0]}"
        started[rid] = time.perf_counter()
        deliveries[rid] = []
        counted[rid] = 0
        manager.add_request(ids, request_id=rid, max_new_tokens=max_tokens, streaming=True, eos_token_id=eos)

    for _ in range(concurrency):
        submit()
    open_ = concurrency
    while open_:
        try:
            output = manager.get_result(timeout=1)
        except queue.Empty:
            output = None
        if output is None:
            if not manager.is_running():
                raise RuntimeError("the continuous batching manager stopped")
            continue
        now = time.perf_counter()
        rid = output.request_id
        if output.error is not None:
            raise RuntimeError(f"request {rid} failed: {output.error}")
        n = len(output.generated_tokens)
        deliveries[rid].append((now, n - counted[rid]))
        counted[rid] = n
        if output.is_finished():
            window.finish(started.pop(rid), deliveries.pop(rid))
            counted.pop(rid)
            open_ -= 1
            if window.open():
                submit()
                open_ += 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model-dir", required=True)
    p.add_argument("--prompt", default="Write a long story about a lighthouse keeper who finds a message in a bottle.")
    p.add_argument("--endpoint", choices=("chat", "completions"), default="chat")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--concurrency", default="1,8")
    p.add_argument("--duration-s", type=float, default=20)
    p.add_argument("--warmup-s", type=float, default=3)
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    p.add_argument("--ways", default="generate,cb")
    p.add_argument("--cb-num-blocks", type=int, default=64)
    p.add_argument("--cb-max-batch-tokens", type=int, default=1024)
    a = p.parse_args()
    torch, transformers = import_transformers()
    if a.threads:
        torch.set_num_threads(a.threads)
    tokenizer = transformers.AutoTokenizer.from_pretrained(a.model_dir)
    model = transformers.AutoModelForCausalLM.from_pretrained(a.model_dir, dtype=torch.float32).eval()
    if a.endpoint == "chat":
        text = tokenizer.apply_chat_template([{"role": "user", "content": a.prompt}], add_generation_prompt=True,
                                             tokenize=False)
        ids = tokenizer(text, add_special_tokens=False).input_ids
    else:
        ids = tokenizer(a.prompt).input_ids
    eos = model.generation_config.eos_token_id
    levels = [int(c) for c in a.concurrency.split(",")]
    ways = a.ways.split(",")
    if "generate" in ways and 1 in levels:
        window = Window(a.warmup_s, a.duration_s)
        run_generate(torch, model, ids, eos, a.max_tokens, window)
        print(json.dumps(dict(window.figures("generate", 1, a.max_tokens), threads=torch.get_num_threads())),
              flush=True)
    if "cb" in ways:
        generation = transformers.GenerationConfig(do_sample=False, eos_token_id=eos, max_new_tokens=a.max_tokens)
        cb = transformers.ContinuousBatchingConfig(num_blocks=a.cb_num_blocks, max_batch_tokens=a.cb_max_batch_tokens)
        manager = model.init_continuous_batching(generation_config=generation, continuous_batching_config=cb)
        manager.start()
        try:
            for c in levels:
                window = Window(a.warmup_s, a.duration_s)
                run_cb(manager, ids, eos, a.max_tokens, c, window)
                print(json.dumps(dict(window.figures("cb", c, a.max_tokens), threads=torch.get_num_threads())),
                      flush=True)
        finally:
            manager.stop(block=True, timeout=10)


if __name__ == "__main__":
    main()
