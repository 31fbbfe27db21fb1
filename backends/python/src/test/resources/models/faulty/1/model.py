# Misbehaves on request: the request parameter "mode" selects the fault.
import json
import os
import sys
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.args = args

    def execute(self, requests):
        modes = [json.loads(r.parameters()).get("mode", "ok") for r in requests]
        first = modes[0]
        if first == "raise":
            raise RuntimeError("boom from execute")
        if first == "none":
            return None
        if first == "not_list":
            return pb_utils.InferenceResponse([])
        if first == "wrong_len":
            return [self.ok(requests[0])] * (len(requests) + 1)
        if first == "exit":
            os._exit(3)
        if first == "hang":
            while True:
                pass
        if first == "sleep":
            time.sleep(json.loads(requests[0].parameters()).get("seconds", 1))
        if first == "bls":
            req = pb_utils.InferenceRequest(model_name="other", requested_output_names=["X"],
                                            inputs=[pb_utils.Tensor("X", np.zeros(1, np.float32))])
            r = req.exec()
            if r.has_error():
                raise pb_utils.TritonModelException("BLS failed: " + r.error().message())
        if first == "wait_cancel":
            pb_utils.Logger.log_info("faulty: waiting for the cancellation")  # the tests' handshake
            deadline = time.time() + 10
            while not requests[0].is_cancelled() and time.time() < deadline:
                time.sleep(0.005)
            if requests[0].is_cancelled():
                return [pb_utils.InferenceResponse(error=pb_utils.TritonError("saw the cancellation",
                                                                              pb_utils.TritonError.CANCELLED))]
        if first == "log":
            print("hello from print")
            pb_utils.Logger.log_info("hello from Logger")
            pb_utils.Logger.log_error("an error line from Logger")
            sys.stderr.write("hello from stderr\n")
        out = []
        for r, m in zip(requests, modes):
            if m == "error_response":
                out.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("bad input here", pb_utils.TritonError.INVALID_ARG)))
            elif m == "not_response":
                out.append("oops")
            else:
                out.append(self.ok(r))
        return out

    def ok(self, request):
        inp = pb_utils.get_input_tensor_by_name(request, "INPUT0")
        return pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", inp.as_numpy() * 2)])
