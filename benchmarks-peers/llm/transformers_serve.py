#!/usr/bin/env python3
"""`transformers serve`, exactly as its console script runs it, with one workaround: torchvision is imported first
with torch.library.register_fake a no-op. transformers' serving imports AutoProcessor, which imports torchvision where
it is installed, and the local index's torchvision wheel is built against CUDA torch: its native ops do not register
beside torch+cpu ("RuntimeError: operator torchvision::nms does not exist", surfacing as "Could not import module
'AutoProcessor'"). tools/model-env.sh and samples/llm's model.py say the same. And one compatibility shim: transformers
5.18 ends its event streams after the last chunk (finish_reason, usage) without OpenAI's closing `data: [DONE]`, which
OpenAI's API sends and `backplane bench` requires (a stream without it counts as cut off); its streaming responses get
that one line appended. Nothing else is changed. The arguments are the CLI's:

    transformers_serve.py serve /path/to/model --host 127.0.0.1 --port 8000 [--continuous-batching]
"""
import sys

import torch

_real = torch.library.register_fake
torch.library.register_fake = lambda *a, **k: (lambda f: f)
try:
    try:
        import torchvision  # noqa: F401 (once imported, transformers' lazy imports find it there)
    except ImportError:
        pass
finally:
    torch.library.register_fake = _real

from transformers.cli.serving import chat_completion, completion  # noqa: E402
from transformers.cli.transformers import main  # noqa: E402


class _DoneStreamingResponse(chat_completion.StreamingResponse):
    """fastapi's StreamingResponse; an event stream ends with `data: [DONE]` as OpenAI's do."""

    def __init__(self, content, *args, media_type=None, **kwargs):
        if media_type == "text/event-stream":
            body = content

            async def with_done():
                async for part in body:
                    yield part
                yield "data: [DONE]\n\n"

            content = with_done()
        super().__init__(content, *args, media_type=media_type, **kwargs)


chat_completion.StreamingResponse = _DoneStreamingResponse
completion.StreamingResponse = _DoneStreamingResponse

if __name__ == "__main__":
    sys.argv = ["transformers"] + sys.argv[1:]
    sys.exit(main())
