# A decoupled flood in the style of generate_stream on repeat_decoupled: for IN = n and a (large)
# DATA input it sends n responses OUT = [i, len(DATA)] straight from execute(), as fast as the
# stub takes them, then the FINAL flag.
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            n = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
            size = int(pb_utils.get_input_tensor_by_name(request, "DATA").as_numpy().size)
            for i in range(n):
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([i, size], dtype=np.int32))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
