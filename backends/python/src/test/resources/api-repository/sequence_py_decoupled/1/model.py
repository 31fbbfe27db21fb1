# Counts the requests of each sequence: the first answers 1, the next 2, and so on. Keyed by
# request.correlation_id(); a start for a live id, or a continuation of an unknown one, fails.
# Decoupled (model_transaction_policy), every request gets three responses and then the final flag.
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.decoupled = config.get("model_transaction_policy", {}).get("decoupled", False)
        self.counts = {}

    def _next(self, request):
        cid = request.correlation_id()
        flags = request.flags()
        if flags & pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START:
            if cid in self.counts:
                raise pb_utils.TritonModelException("sequence %r started twice" % (cid,))
            self.counts[cid] = 0
        elif cid not in self.counts:
            raise pb_utils.TritonModelException("sequence %r continues without a start" % (cid,))
        self.counts[cid] += 1
        value = self.counts[cid]
        if flags & pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END:
            del self.counts[cid]
        return pb_utils.Tensor("OUTPUT0", np.array([value], dtype=np.int32))

    def execute(self, requests):
        if not self.decoupled:
            return [pb_utils.InferenceResponse([self._next(r)]) for r in requests]
        for request in requests:
            sender = request.get_response_sender()
            out = self._next(request)
            for _ in range(3):
                sender.send(pb_utils.InferenceResponse([out]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
