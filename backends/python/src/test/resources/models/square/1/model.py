# A decoupled model in the style of Triton's square_int32 / repeat_int32 examples: for input IN = n
# it sends n responses OUT = n*n from a background thread, then the FINAL flag.
import json
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.model_config = json.loads(args["model_config"])
        if not pb_utils.using_decoupled_model_transaction_policy(self.model_config):
            raise pb_utils.TritonModelException("square needs a decoupled model_transaction_policy")
        self.inflight = 0
        self.lock = threading.Lock()

    def execute(self, requests):
        for request in requests:
            params = json.loads(request.parameters())
            mode = params.get("mode", "")
            if mode == "final_then_raise":
                request.get_response_sender().send(
                    pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([7], dtype=np.int32))]),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                continue
            if mode == "raise":
                raise ValueError("square failed on purpose")
            thread = threading.Thread(target=self.respond, args=(request, mode))
            thread.daemon = True
            with self.lock:
                self.inflight += 1
            thread.start()
        return None

    def respond(self, request, mode):
        sender = request.get_response_sender()
        n = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
        for _ in range(n):
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([n * n], dtype=np.int32))]))
            time.sleep(0.001)
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        if mode == "send_after_final":
            try:
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([0], dtype=np.int32))]))
            except pb_utils.TritonModelException as e:
                pb_utils.Logger.log_warn("probe: " + str(e))
        if mode == "hold_sender":
            self.held = sender  # keeps the sender referenced from Python after FINAL
        with self.lock:
            self.inflight -= 1

    def finalize(self):
        pb_utils.Logger.log_info("square finalize, in flight: %d" % self.inflight)
