# Identity as a Flask service (served by gunicorn): float32 bytes in, a numpy copy's bytes out.
import numpy as np
from flask import Flask, Response, request

app = Flask(__name__)


@app.post("/infer")
def infer():
    x = np.frombuffer(request.get_data(), dtype=np.float32).copy()
    return Response(x.tobytes(), mimetype="application/octet-stream")
