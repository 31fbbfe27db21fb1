# A generative model for the python backend, speaking Triton's vLLM-backend tensor convention (text_input, stream,
# sampling_parameters, exclude_input_in_output, return_num_input_tokens / return_num_output_tokens -> text_output,
# num_input_tokens, num_output_tokens), so Triton's OpenAI frontend and generate endpoints drive it unchanged.
#
# It loads a Hugging Face causal LM (float32, CPU) and serves every open request together with transformers' own
# continuous batching (model.init_continuous_batching() -> ContinuousBatchingManager: one background thread runs
# the steps, paged KV cache, requests join and leave between steps). The model is decoupled: execute() hands each
# request to a manager and returns at once; one dispatcher thread of this model takes the managers' outputs
# (every new token of every request, from one queue both managers write to), turns them into text deltas and answers
# through each request's sender. The same thread polls every open request's cancellation (the client went away) at
# least every 20 ms and cancels it in its manager, so no token is computed for it after the next step.
#
# Design notes:
# - Text: the cumulative generated ids are decoded whole at each step and the new suffix is sent; a trailing U+FFFD
#   (an incomplete UTF-8 sequence of a byte-level token) and the tail that could still begin a stop string are held
#   back until the next token settles them. So the concatenated stream is exactly the final text.
# - Two managers, because do_sample is per manager: greedy requests (temperature 0, or top_k 1) go to a greedy one
#   (do_sample=False, no logits processors: the arg-max, the same tokens as model.generate(do_sample=False)), the
#   others to a sampling one with per-request temperature, top_k and top_p, started at the first such request. The
#   per-request processors cost every request of a batch a top-k and a top-p pass over the vocabulary at every
#   step (the zoo's LLM at 8 streams, in-process: 2150 against 3990 tokens/s greedy), so greedy traffic does not
#   pay for them. Each manager has its own KV cache (cb_num_blocks each). A per-request seed is not supported by
#   the manager (one generator for all).
# - Stop strings are found here, in the text: the request ends at the first, which is cut off with what follows.
# - One request's failure (bad parameters, a failed step reported by the manager) ends only that request: an error
#   response and the FINAL flag.
import json
import os
import queue
import threading

import numpy as np
import triton_python_backend_utils as pb_utils

ENV_MODEL_DIR = "BACKPLANE_LLM_MODEL_DIR"
FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL

# sampling_parameters this model honours, and those it refuses rather than silently ignore
_IGNORED = {"seed", "logprobs", "best_of", "skip_special_tokens", "spaces_between_special_tokens", "n",
            "presence_penalty", "frequency_penalty", "repetition_penalty", "min_tokens", "include_stop_str_in_output",
            "stop_token_ids", "length_penalty", "use_beam_search", "min_p", "logit_bias", "user", "return_full_text"}


def _import_transformers():
    # transformers imports torchvision where it is installed; the local index's torchvision wheel is built against
    # CUDA torch and its native ops fail to register beside torch+cpu (tools/model-env.sh). The LLM uses none.
    import torch
    real = torch.library.register_fake
    torch.library.register_fake = lambda *a, **k: (lambda f: f)
    try:
        try:
            import torchvision  # noqa: F401 (once imported, transformers' lazy imports find it there)
        except ImportError:
            pass
        from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
        from transformers.generation.configuration_utils import ContinuousBatchingConfig
    finally:
        torch.library.register_fake = real
    return torch, AutoModelForCausalLM, AutoTokenizer, GenerationConfig, ContinuousBatchingConfig


class _BadRequest(Exception):
    pass


class _Open:
    """One request in flight: its sender, options and what has been sent so far."""

    def __init__(self, sender, stream, prepend, want_in, want_out, prompt, prompt_ids, stops):
        self.sender = sender
        self.stream = stream
        self.prepend = prepend
        self.want_in = want_in
        self.want_out = want_out
        self.prompt = prompt
        self.prompt_ids = prompt_ids
        self.stops = stops
        self.sent = ""            # text sent so far (without the prompt)
        self.tokens = 0           # tokens generated so far
        self.reported = 0         # tokens counted in the responses sent so far
        self.text = ""            # the decoded text so far (stop strings cut off)
        self.first = True
        self.manager = None       # the manager generating it (greedy or sampling)


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        here = args["model_repository"]
        directory = os.environ.get(ENV_MODEL_DIR) or params.get("model_dir") or ""
        directory = directory.replace("$$TRITON_MODEL_DIRECTORY", here)
        if not directory:
            raise pb_utils.TritonModelException(
                f"model '{args['model_name']}': no Hugging Face model directory; set the config parameter model_dir "
                f"(absolute, or relative to {here}) or the environment variable {ENV_MODEL_DIR}")
        directory = os.path.normpath(os.path.join(here, directory))
        if not os.path.isfile(os.path.join(directory, "config.json")):
            raise pb_utils.TritonModelException(
                f"model '{args['model_name']}': model_dir {directory} holds no config.json; point model_dir (or "
                f"{ENV_MODEL_DIR}) at a Hugging Face causal-LM directory, or make the zoo's with "
                f"benchmarks/zoo/make_llm.py --out {directory}")
        torch, AutoModelForCausalLM, AutoTokenizer, GenerationConfig, ContinuousBatchingConfig = _import_transformers()
        if params.get("torch_threads"):
            torch.set_num_threads(int(params["torch_threads"]))
        self.logger = pb_utils.Logger
        self.tokenizer = AutoTokenizer.from_pretrained(directory)
        self.model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
        self.max_context = int(getattr(self.model.config, "max_position_embeddings", 0) or 0)
        self.vocabulary = int(self.model.config.vocab_size)
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        self.eos = eos
        self.GenerationConfig, self.ContinuousBatchingConfig = GenerationConfig, ContinuousBatchingConfig
        self.num_blocks = int(params.get("cb_num_blocks") or 64)
        self.max_batch_tokens = int(params.get("cb_max_batch_tokens") or 1024)
        self.outputs = queue.Queue()  # every manager's outputs (_start_manager)
        self.lock = threading.Lock()
        self.start_lock = threading.Lock()  # starting the sampling manager (slow: not under self.lock)
        self.open = {}
        self.counter = 0
        self.stopping = threading.Event()
        self.managers = {}
        self.greedy = self._start_manager(False)
        self.sampling = None  # started by the first request that samples
        self.dispatcher = threading.Thread(target=self._dispatch, name="llm-dispatcher", daemon=True)
        self.dispatcher.start()
        self.logger.log_info(f"llm: {directory} loaded ({sum(p.numel() for p in self.model.parameters())} "
                             f"parameters, vocabulary {self.vocabulary}, torch threads {torch.get_num_threads()}), "
                             f"continuous batching started")

    def _start_manager(self, sample):
        """A started ContinuousBatchingManager whose outputs go to self.outputs: greedy (do_sample=False, no logits
        processors), or sampling with per-request temperature, top_k and top_p (those exist as per-request
        processors only when the manager's config names a value that is not their neutral one)."""
        if sample:
            generation = self.GenerationConfig(do_sample=True, temperature=0.5, top_k=self.vocabulary, top_p=0.999,
                                               eos_token_id=self.eos, max_new_tokens=16)
        else:
            generation = self.GenerationConfig(do_sample=False, eos_token_id=self.eos, max_new_tokens=16)
        cb = self.ContinuousBatchingConfig(per_request_processors=sample, num_blocks=self.num_blocks,
                                           max_batch_tokens=self.max_batch_tokens)
        manager = self.model.init_continuous_batching(generation_config=generation, continuous_batching_config=cb)
        # One queue for both managers' outputs, so the dispatcher waits on one queue and answers the moment a token
        # comes. The manager puts every output of a request without a result handler on output_router.output_queue
        # (transformers 5.x); its get_result() reads that queue, which this model does not call.
        router = getattr(manager, "output_router", None)
        if router is None or not isinstance(getattr(router, "output_queue", None), queue.Queue):
            raise RuntimeError("this transformers' ContinuousBatchingManager has no output_router.output_queue; "
                               "samples/llm's model.py needs transformers 5.x (tools/model-env.sh installs it)")
        router.output_queue = self.outputs
        manager.start()
        self.managers[manager] = "sampling" if sample else "greedy"
        return manager

    def _manager(self, greedy):
        if greedy:
            return self.greedy
        with self.start_lock:
            if self.sampling is None:
                self.sampling = self._start_manager(True)
                self.logger.log_info("llm: the first sampling request started the sampling manager")
            return self.sampling

    # ------------------------------------------------------------------------------------------------ requests

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            try:
                self._submit(request, sender)
            except _BadRequest as e:
                self._fail(sender, pb_utils.TritonError(str(e), pb_utils.TritonError.INVALID_ARG))
            except Exception as e:  # noqa: BLE001 — one request's failure ends that request only
                self._fail(sender, pb_utils.TritonError(f"{type(e).__name__}: {e}"))
        return None

    @staticmethod
    def _bool(request, name, default):
        t = pb_utils.get_input_tensor_by_name(request, name)
        return default if t is None else bool(t.as_numpy().reshape(-1)[0])

    def _submit(self, request, sender):
        t = pb_utils.get_input_tensor_by_name(request, "text_input")
        prompt = t.as_numpy().reshape(-1)[0]
        prompt = prompt.decode("utf-8") if isinstance(prompt, bytes) else str(prompt)
        stream = self._bool(request, "stream", False)
        exclude = pb_utils.get_input_tensor_by_name(request, "exclude_input_in_output")
        # vLLM backend's rule: absent means "prepend" for a whole answer and "do not" for a stream
        prepend = (not bool(exclude.as_numpy().reshape(-1)[0])) if exclude is not None else not stream
        if prepend and stream:
            raise _BadRequest("When streaming, `exclude_input_in_output` = False is not allowed.")
        sp = pb_utils.get_input_tensor_by_name(request, "sampling_parameters")
        options = {}
        if sp is not None:
            raw = sp.as_numpy().reshape(-1)[0]
            raw = raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
            if raw.strip():
                try:
                    options = json.loads(raw)
                except ValueError as e:
                    raise _BadRequest(f"sampling_parameters is not JSON ({e}): {raw[:200]!r}")
                if not isinstance(options, dict):
                    raise _BadRequest(f"sampling_parameters must be a JSON object, not {raw[:200]!r}")
        max_tokens, kwargs, stops, eos, greedy = self._sampling(options)
        ids = self.tokenizer(prompt).input_ids
        if not ids:
            raise _BadRequest("text_input is empty: give the model a prompt of at least one token")
        if self.max_context and len(ids) + max_tokens > self.max_context:
            raise _BadRequest(f"the prompt's {len(ids)} tokens plus max_tokens {max_tokens} exceed the model's "
                              f"context of {self.max_context} tokens; shorten the prompt or lower max_tokens")
        manager = self._manager(greedy)
        state = _Open(sender, stream, prepend, self._bool(request, "return_num_input_tokens", False),
                      self._bool(request, "return_num_output_tokens", False), prompt, ids, stops)
        state.manager = manager
        with self.lock:
            self.counter += 1
            rid = f"llm-{self.counter}"
            self.open[rid] = state
        try:
            added = manager.add_request(ids, request_id=rid, max_new_tokens=max_tokens, streaming=True,
                                        eos_token_id=eos, **({} if greedy else kwargs))
        except BaseException:
            with self.lock:
                self.open.pop(rid, None)
            raise
        if added is None:
            with self.lock:
                self.open.pop(rid, None)
            raise RuntimeError("the continuous batching manager takes no more requests (it is stopping or failed)")

    def _sampling(self, o):
        unknown = sorted(k for k in o if k not in _IGNORED and k not in
                         ("max_tokens", "temperature", "top_p", "top_k", "stop", "ignore_eos"))
        if unknown:
            raise _BadRequest(f"sampling_parameters {unknown} are unknown; this model takes max_tokens, temperature, "
                              f"top_p, top_k, stop, ignore_eos (and ignores seed)")
        for k, neutral in (("n", 1), ("best_of", 1), ("min_tokens", 0), ("presence_penalty", 0),
                           ("frequency_penalty", 0), ("repetition_penalty", 1), ("min_p", 0)):
            if k in o and o[k] is not None and float(o[k]) != neutral:
                raise _BadRequest(f"sampling_parameters {k}={o[k]!r} is not supported by this model "
                                  f"(transformers' continuous batching); leave it out or set it to {neutral}")
        try:
            max_tokens = int(o.get("max_tokens") if o.get("max_tokens") is not None else 16)
            temperature = float(o.get("temperature") if o.get("temperature") is not None else 1.0)
            top_p = float(o.get("top_p") if o.get("top_p") is not None else 1.0)
            top_k = int(o.get("top_k") if o.get("top_k") is not None else -1)
        except (TypeError, ValueError) as e:
            raise _BadRequest(f"sampling_parameters holds a value of the wrong type ({e}): {o}")
        if max_tokens < 1:
            raise _BadRequest(f"max_tokens must be at least 1, not {max_tokens}")
        if temperature < 0 or not 0 < top_p <= 1:
            raise _BadRequest(f"temperature must be >= 0 and top_p in (0, 1]; got temperature {temperature}, top_p {top_p}")
        if top_k <= 0 or top_k > self.vocabulary:
            top_k = self.vocabulary
        greedy = temperature == 0 or top_k == 1  # the greedy manager's arg-max
        stop = o.get("stop") or []
        stops = [stop] if isinstance(stop, str) else list(stop)
        if not all(isinstance(s, str) and s for s in stops):
            raise _BadRequest(f"stop must be a non-empty string or a list of them, not {stop!r}")
        eos = -1 if o.get("ignore_eos") else self.eos
        return max_tokens, {"temperature": temperature, "top_k": top_k, "top_p": top_p}, stops, eos, greedy

    # ---------------------------------------------------------------------------------------------- dispatcher

    def _dispatch(self):
        while not self.stopping.is_set():
            try:
                output = self.outputs.get(timeout=0.02)
            except queue.Empty:
                output = None
            try:
                if output is not None:
                    for latest in self._coalesce(output):
                        self._deliver(latest)
                self._poll_cancelled()
                stopped = [name for m, name in list(self.managers.items()) if not m.is_running()]
                if output is None and stopped:
                    self._fail_all(f"the continuous batching manager ({', '.join(stopped)}) stopped")
                    self.stopping.wait(0.1)
            except Exception as e:  # noqa: BLE001 — the dispatcher must outlive any one request
                self.logger.log_error(f"llm: dispatcher: {type(e).__name__}: {e}")

    def _coalesce(self, output):
        """output and every output already queued behind it, the latest of each request only: a streaming
        output carries all the request's tokens so far, so one that is overtaken adds nothing but a decode and a
        response. A dispatcher that falls behind the steps (8 streams on 2 cores) sends fewer, larger pieces
        instead of falling further behind. An error or the finished output is kept as it is."""
        latest = {output.request_id: output}
        while True:
            try:
                o = self.outputs.get_nowait()
            except queue.Empty:
                return list(latest.values())
            previous = latest.get(o.request_id)
            if previous is None or (previous.error is None and not previous.is_finished()):
                latest[o.request_id] = o

    def _poll_cancelled(self):
        with self.lock:
            cancelled = [(rid, s) for rid, s in self.open.items() if s.sender.is_cancelled()]
            for rid, _ in cancelled:
                del self.open[rid]
        for rid, state in cancelled:
            state.manager.cancel_request(rid)
            self.logger.log_info(f"llm: request {rid} cancelled by its client after {state.tokens} tokens")
            state.sender.send(flags=FINAL)

    def _deliver(self, output):
        with self.lock:
            state = self.open.get(output.request_id)
        if state is None:
            return  # cancelled: the manager may still report the step it was in
        if output.error is not None:
            with self.lock:
                self.open.pop(output.request_id, None)
            self._fail(state.sender, pb_utils.TritonError(f"generation failed: {output.error}"))
            return
        tokens = list(output.generated_tokens)
        state.tokens = len(tokens)
        text = self.tokenizer.decode(tokens, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        finished = output.is_finished()
        found = [at for at in (text.find(s, max(0, len(state.text) - len(s) - 4)) for s in state.stops) if at >= 0]
        if found:  # the first stop string ends the request, cut off with what follows
            text, finished = text[:min(found)], True
            state.manager.cancel_request(output.request_id)
        state.text = text
        if finished:
            with self.lock:
                self.open.pop(output.request_id, None)
            self._answer(state, text, final=True)
        elif state.stream:
            stable = text.rstrip("\ufffd")
            for s in state.stops:  # hold back a tail that could still grow into a stop string
                for n in range(min(len(s) - 1, len(stable)), 0, -1):
                    if s.startswith(stable[-n:]):
                        stable = stable[:-n]
                        break
            if len(stable) > len(state.sent) and stable.startswith(state.sent):
                self._answer(state, stable, final=False)

    def _answer(self, state, text, final):
        if state.stream:
            if text.startswith(state.sent):
                delta = text[len(state.sent):]
            else:  # the decoding of the whole changed what was sent (should not happen): send what is new
                delta = text[len(state.sent):] if len(text) > len(state.sent) else ""
            if delta or (final and state.tokens > state.reported):
                state.sender.send(self._response(state, delta), 0)
            if final:
                state.sender.send(flags=FINAL)
            state.sent = text
        else:
            state.sender.send(self._response(state, (state.prompt if state.prepend else "") + text), FINAL)

    def _response(self, state, text):
        outputs = [pb_utils.Tensor("text_output", np.array([text.encode("utf-8")], dtype=np.object_))]
        if state.want_in:
            outputs.append(pb_utils.Tensor("num_input_tokens", np.array([len(state.prompt_ids)], dtype=np.uint32)))
        if state.want_out:
            outputs.append(pb_utils.Tensor("num_output_tokens", np.array([state.tokens - state.reported], dtype=np.uint32)))
        state.reported = state.tokens
        return pb_utils.InferenceResponse(output_tensors=outputs)

    @staticmethod
    def _fail(sender, error):
        sender.send(pb_utils.InferenceResponse(error=error), FINAL)

    def _fail_all(self, message):
        with self.lock:
            states = list(self.open.values())
            self.open.clear()
        for s in states:
            self._fail(s.sender, pb_utils.TritonError(message, pb_utils.TritonError.UNAVAILABLE))

    def finalize(self):
        self.stopping.set()
        self.dispatcher.join(timeout=10)
        for manager in list(self.managers):
            manager.stop(block=True, timeout=10, hard_stop=True)
        self._fail_all("the model is being unloaded")
