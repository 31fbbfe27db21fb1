# Starts processes that would outlive the stub unless its process group is killed (StubProcessGroupTest):
# in initialize(), a subprocess.Popen of a sleeper and an os.fork()ed child that sleeps; execute() reports
# their pids (and the stub's own) as PIDS: [stub, popen child, forked child].
import os
import subprocess
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.sleeper = subprocess.Popen(["sleep", "600"])
        pid = os.fork()
        if pid == 0:
            try:
                time.sleep(600)
            finally:
                os._exit(0)
        self.forked = pid

    def execute(self, requests):
        pids = np.array([os.getpid(), self.sleeper.pid, self.forked], dtype=np.int64)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("PIDS", pids)]) for _ in requests]
