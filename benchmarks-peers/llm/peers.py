#!/usr/bin/env python3
"""Generation, side by side in one run (benchmarks-peers/llm-peers.sh makes what is missing and calls this).

Peers, one after the other, on the same Hugging Face directory, the same prompt, greedy, the same max_tokens:

    backplane   `backplane serve` (the dist) with samples/llm/models (model.py as it is, config.pbtxt's model_dir
                and tokenizer pointed at the directory), its openai frontend
    ts          `transformers serve DIR` as its documentation runs it (no continuous batching: one inference thread,
                model.generate per request, one request at a time)
    ts-cb       `transformers serve DIR --continuous-batching` (its CB manager, default --cb-* settings)
    floor       transformers in-process (floor.py): model.generate with a streamer (1 stream), the CB manager (1 and
                8 streams); no server, no HTTP

Every server is measured by the same client, `backplane bench --openai-url` (JSON output); the floor measures itself
the same way. Every peer runs with OMP_NUM_THREADS=--threads in its environment (torch's intra-op threads; floor.py
also calls torch.set_num_threads) and HF_HUB_OFFLINE=1. Prints a markdown table with the ratios of Backplane to
each peer, the load average before and after each peer, and writes it to --out too.
"""
import argparse
import datetime
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url, process, log, deadline_s, expect=None):
    """Until GET url answers (any status; with expect, 200 and a body holding it) or the process ends or the
    deadline passes."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with status {process.returncode} before answering; its log "
                               f"{log}:\n{tail(log)}")
        try:
            body = urllib.request.urlopen(url, timeout=2).read().decode("utf-8", "replace")
            if expect is None or expect in body:
                return
            time.sleep(0.5)
        except urllib.error.HTTPError:
            if expect is None:
                return
            time.sleep(0.5)
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"no answer at {url} within {deadline_s} s; its log {log}:\n{tail(log)}")


def tail(path, n=30):
    with open(path, errors="replace") as f:
        return "".join(f.readlines()[-n:])


def stop(process):
    """SIGTERM to the server's process group (it was started as its leader), SIGKILL after 30 s."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def bench(a, url, model, workdir, name):
    """A warm-up pass (the highest concurrency for --server-warmup-s, unmeasured: JIT, lazy initialisation such
    as transformers serve's CB manager, made at the first request), then the measured levels."""
    out = os.path.join(workdir, f"{name}.json")
    base = [os.path.join(a.dist, "bin", "backplane"), "bench", "--openai-url", url, "--openai-endpoint", a.endpoint,
            "--model", model, "--max-tokens", str(a.max_tokens)] + (["--prompt", a.prompt] if a.prompt else [])
    top = str(max(int(c) for c in a.concurrency.split(",")))
    subprocess.run(base + ["--concurrency", top, "--duration-s", str(a.server_warmup_s), "--warmup-s", "0",
                           "--output", os.path.join(workdir, f"{name}-warmup.txt")], check=True, stdout=sys.stderr)
    cmd = base + ["--concurrency", a.concurrency, "--duration-s", str(a.duration_s), "--warmup-s", str(a.warmup_s),
                  "--format", "json", "--output", out]
    print("  $ " + " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    with open(out) as f:
        data = json.load(f)
    levels = data if isinstance(data, list) else data.get("levels") or data.get("results") or [data]
    return {int(level["concurrency"]): level for level in levels}


def serve_and_bench(a, name, cmd, env, url, model, workdir, expect=None):
    log = os.path.join(workdir, f"{name}.log")
    print(f"{name}: starting ({' '.join(cmd)}), log {log}", file=sys.stderr, flush=True)
    with open(log, "w") as out:
        process = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                   cwd=ROOT)
    try:
        wait_ready(url + "/v1/models", process, log, a.start_timeout_s, expect)
        before = loadavg()
        levels = bench(a, url, model, workdir, name)
        after = loadavg()
    finally:
        stop(process)
    return levels, before, after


def sample_repository(workdir, llm):
    """samples/llm/models with its config's model_dir and tokenizer pointed at llm: a copy (BACKPLANE_LLM_MODEL_DIR would move model_dir only; the openai frontend reads
    the chat template from the folder the parameter 'tokenizer' names)."""
    sample = os.path.join(ROOT, "samples/llm/models/llm")
    target = os.path.join(workdir, "models", "llm")
    shutil.copytree(sample, target, ignore=shutil.ignore_patterns("hf", "__pycache__"))
    with open(os.path.join(sample, "config.pbtxt")) as f:
        config = f.read()
    for key in ("model_dir", "tokenizer"):
        old = f'parameters {{ key: "{key}" value: {{ string_value: "$$TRITON_MODEL_DIRECTORY/hf" }} }}'
        if old not in config:
            raise RuntimeError(f"samples/llm/models/llm/config.pbtxt no longer holds {old}; update peers.py")
        config = config.replace(old, f'parameters {{ key: "{key}" value: {{ string_value: "{llm}" }} }}')
    with open(os.path.join(target, "config.pbtxt"), "w") as f:
        f.write(config)
    return os.path.dirname(target)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--python", required=True, help="the model environment's python (tools/model-env.sh)")
    p.add_argument("--dist", required=True, help="the distribution (dist/target/backplane)")
    p.add_argument("--llm", required=True, help="the Hugging Face directory (benchmarks/zoo/make_llm.py)")
    p.add_argument("--peers", default="backplane,ts,ts-cb,floor")
    p.add_argument("--endpoint", choices=("chat", "completions"), default="chat")
    p.add_argument("--prompt", default=None, help="default: the bench's")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--concurrency", default="1,8")
    p.add_argument("--duration-s", type=float, default=20)
    p.add_argument("--warmup-s", type=float, default=3, help="unmeasured seconds before each level")
    p.add_argument("--server-warmup-s", type=float, default=10,
                   help="an unmeasured pass at the highest concurrency after each server starts")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads of every peer (OMP_NUM_THREADS)")
    p.add_argument("--start-timeout-s", type=float, default=180)
    p.add_argument("--out", default=None, help="also write the table here")
    p.add_argument("--keep", action="store_true", help="keep the work folder (servers' logs, the bench's JSON)")
    a = p.parse_args()
    llm = os.path.abspath(a.llm)
    dist = os.path.abspath(a.dist)
    a.dist = dist
    peers = a.peers.split(",")
    unknown = [x for x in peers if x not in ("backplane", "ts", "ts-cb", "floor")]
    if unknown:
        p.error(f"unknown peers {unknown}; choose from backplane, ts, ts-cb, floor")
    workdir = tempfile.mkdtemp(prefix="llm-peers-")
    hub = os.path.join(workdir, "hf-hub")  # transformers serve's /v1/models scans the hub cache; an empty one
    os.makedirs(hub)
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), HF_HUB_OFFLINE="1", HF_HUB_CACHE=hub,
               TOKENIZERS_PARALLELISM="false")
    results, loads = {}, {}
    started = datetime.datetime.now(datetime.timezone.utc)
    start_load = loadavg()
    for peer in peers:
        if peer == "backplane":
            port = free_port()
            cmd = [os.path.join(dist, "bin", "backplane"), "serve", "--model-repository",
                   sample_repository(workdir, llm), "--backend-config",
                   f"python,python_interpreter={a.python}", "--http-port", "-1", "--grpc-port", "-1",
                   "--metrics-port", "-1", "--openai-port", str(port), "--openai-address", "127.0.0.1"]
            levels, before, after = serve_and_bench(a, peer, cmd, env, f"http://127.0.0.1:{port}", "llm", workdir,
                                                    expect='"id":"llm"')
        elif peer in ("ts", "ts-cb"):
            port = free_port()
            cmd = [a.python, os.path.join(HERE, "transformers_serve.py"), "serve", llm, "--host", "127.0.0.1",
                   "--port", str(port)] + (["--continuous-batching"] if peer == "ts-cb" else [])
            levels, before, after = serve_and_bench(a, peer, cmd, env, f"http://127.0.0.1:{port}", llm, workdir)
        else:
            before = loadavg()
            cmd = [a.python, os.path.join(HERE, "floor.py"), "--model-dir", llm, "--endpoint", a.endpoint,
                   "--max-tokens", str(a.max_tokens), "--concurrency", a.concurrency, "--duration-s",
                   str(a.duration_s), "--warmup-s", str(a.warmup_s), "--threads", str(a.threads)]
            if a.prompt:
                cmd += ["--prompt", a.prompt]
            print(f"floor: {' '.join(cmd)}", file=sys.stderr, flush=True)
            run = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, cwd=ROOT)
            after = loadavg()
            for line in run.stdout.splitlines():
                row = json.loads(line)
                results.setdefault(f"floor-{row['way']}", {})[int(row["concurrency"])] = row
                loads[f"floor-{row['way']}"] = (before, after)
            continue
        results[peer] = levels
        loads[peer] = (before, after)
    table = render(a, results, loads, started, start_load)
    print(table)
    if a.out:
        with open(a.out, "w") as f:
            f.write(table)
    if a.keep:
        print(f"servers' logs and the bench's JSON in {workdir}", file=sys.stderr)
    else:
        shutil.rmtree(workdir)  # a failed run leaves it, with the logs its error names


NAMES = {"backplane": "Backplane (samples/llm, openai frontend)", "ts": "transformers serve (default)",
         "ts-cb": "transformers serve --continuous-batching", "floor-generate": "floor: model.generate + streamer",
         "floor-cb": "floor: CB manager in-process"}


def fmt(v, digits=1):
    return "—" if v is None else f"{v:.{digits}f}"


def ratio(x, y):
    return "—" if x is None or y in (None, 0) else f"{x / y:.2f}"


def render(a, results, loads, started, start_load):
    lines = [f"{started:%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, load average at the start {start_load}; "
             f"{a.endpoint} endpoint, max_tokens {a.max_tokens}, greedy, {a.duration_s:g} s measured after "
             f"{a.warmup_s:g} s warm-up per level (servers: {a.server_warmup_s:g} s at the highest concurrency "
             f"first), torch threads {a.threads} (OMP_NUM_THREADS) for every peer", ""]
    lines.append("| streams | peer | output tok/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | tokens/req | requests "
                 "| load avg before → after |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    levels = sorted({c for r in results.values() for c in r})
    for c in levels:
        for peer in NAMES:
            row = results.get(peer, {}).get(c)
            if row is None:
                continue
            n = row.get("requests") if row.get("requests") is not None else row.get("successes")
            if n is None and row.get("requests_per_s") is not None:
                n = round(row["requests_per_s"] * float(row.get("seconds") or a.duration_s))
            lines.append(f"| {c} | {NAMES[peer]} | {fmt(row.get('output_tokens_per_s'))} | "
                         f"{fmt(row.get('ttft_p50_ms'))} | {fmt(row.get('ttft_p99_ms'))} | "
                         f"{fmt(row.get('itl_p50_ms'), 2)} | {fmt(row.get('mean_output_tokens'))} | {n} | "
                         f"{loads[peer][0]} → {loads[peer][1]} |")
    bp = results.get("backplane", {})
    if bp:
        lines += ["", "Ratios, Backplane / peer (tok/s: higher is better for Backplane; TTFT, ITL: lower is):", ""]
        lines.append("| streams | peer | output tok/s | TTFT p50 | TTFT p99 | ITL p50 |")
        lines.append("|---|---|---|---|---|---|")
        for c in levels:
            mine = bp.get(c)
            if mine is None:
                continue
            for peer in NAMES:
                row = results.get(peer, {}).get(c)
                if peer == "backplane" or row is None:
                    continue
                lines.append(f"| {c} | {NAMES[peer]} | "
                             + " | ".join(ratio(mine.get(k), row.get(k)) for k in
                                          ("output_tokens_per_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms"))
                             + " |")
    for peer in results:
        errors = [(c, r.get("errors"), r.get("first_error")) for c, r in results[peer].items() if r.get("errors")]
        for c, e, first in errors:
            lines.append(f"\n{NAMES[peer]} at {c} streams: {e} errors, the first: {first}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
