# The zoo's BERT encoder as a Ray Serve deployment (one replica per instance, Ray Serve's default
# max_ongoing_requests) behind Serve's HTTP proxy on 127.0.0.1:<port>/infer: the wire format of
# encoder_peer.py. Prints READY once the deployment answers, then serves until stdin closes.
#   python ray_encoder.py <settings.json> <port> <replicas>
import os
import sys

import ray
from ray import serve
from starlette.requests import Request
from starlette.responses import Response

settings, port, replicas = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
here = os.path.dirname(os.path.abspath(__file__))
ray.init(include_dashboard=False, log_to_driver=False, object_store_memory=128 * 1024 * 1024,
         runtime_env={"env_vars": {"PYTHONPATH": here}})
serve.start(http_options={"host": "127.0.0.1", "port": port})


@serve.deployment(num_replicas=replicas, ray_actor_options={"num_cpus": 0})
class Encoder:
    def __init__(self):
        import encoder_peer
        self.peer = encoder_peer
        self.model = encoder_peer.load(settings)

    async def __call__(self, request: Request):
        return Response(self.peer.run(self.model, await request.body()), media_type="application/octet-stream")


serve.run(Encoder.bind(), route_prefix="/infer", blocking=False)
print("READY", flush=True)
sys.stdin.read()  # the benchmark closes our stdin to stop us
serve.shutdown()
ray.shutdown()
