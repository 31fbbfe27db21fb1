# A plain (non-decoupled) model answering the ways Triton's response-sender rules allow, and some they refuse.
from . import behaviour


class TritonPythonModel:
    def execute(self, requests):
        return behaviour.answer(requests, run_later=behaviour.in_thread)
