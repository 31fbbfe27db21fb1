import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        raise ValueError("bad init: weights missing")

    def execute(self, requests):
        return []
