# The zoo's BERT encoder for DJL's Python engine: the wire format of encoder_peer.py; settings.json
# sits beside this file.
import os

from djl_python import Output

import encoder_peer

_model = None


def handle(inputs):
    global _model
    if _model is None:
        _model = encoder_peer.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "settings.json"))
    if inputs.is_empty():
        return None  # DJL's warm-up call
    out = Output()
    out.add(encoder_peer.run(_model, inputs.get_as_bytes()))
    return out
