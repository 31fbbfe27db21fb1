# The zoo's BERT encoder as a Flask service (served by gunicorn, one sync worker per instance):
# the wire format of encoder_peer.py over POST /infer. Settings: $PEER_SETTINGS (settings.json).
import os

from flask import Flask, Response, request

import encoder_peer

model = encoder_peer.load(os.environ["PEER_SETTINGS"])
app = Flask(__name__)


@app.post("/infer")
def infer():
    return Response(encoder_peer.run(model, request.get_data()), mimetype="application/octet-stream")
