# Echoes every input IN_<suffix> it receives as OUT_<suffix> (any datatype, any shape).
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            outs = [pb_utils.Tensor("OUT_" + t.name()[3:], t.as_numpy()) for t in request.inputs()]
            responses.append(pb_utils.InferenceResponse(outs))
        return responses
