# Reports the process it runs in (StubForkTest): ids, session and group, working directory, the
# environment variable the request names, the collector's state, the shared-memory files it maps, its
# open descriptors, and a draw of numpy's global random state.
import gc
import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.garbage = [[i] for i in range(1000)]  # something initialize() leaves for the freeze

    def execute(self, requests):
        responses = []
        for request in requests:
            names = json.loads(request.parameters()).get("env", "")
            maps = set()
            with open("/proc/self/maps") as f:
                for line in f:
                    path = line.split()[-1] if len(line.split()) >= 6 else ""
                    if path.startswith("/dev/shm/backplane-"):
                        maps.add(os.path.basename(path))
            fds = {}
            for fd in os.listdir("/proc/self/fd"):
                try:
                    fds[fd] = os.readlink("/proc/self/fd/" + fd)
                except OSError:
                    pass
            info = {
                "pid": os.getpid(),
                "ppid": os.getppid(),
                "pgid": os.getpgid(0),
                "sid": os.getsid(0),
                "cwd": os.getcwd(),
                "env": {n: os.environ.get(n) for n in names.split(",") if n},
                "gc_freeze_count": gc.get_freeze_count(),
                "gc_enabled": gc.isenabled(),
                "shm": sorted(maps),
                "fds": fds,
                "random": float(np.random.random()),
            }
            inp = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUTPUT0", inp.as_numpy()),
                pb_utils.Tensor("INFO", np.array([json.dumps(info).encode()], dtype=np.object_)),
            ]))
        return responses
