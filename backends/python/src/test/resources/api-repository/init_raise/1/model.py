# Fails in initialize() from a helper: the client reads the error and where it was raised, never a
# source line (this file could be a link to a file that is not Python at all); the log has it all.
def check(settings):
    raise ValueError("no weights at %s" % settings)  # source-line-marker-7f3a


class TritonPythonModel:
    def initialize(self, args):
        check("/models/weights.bin")

    def execute(self, requests):
        return None
