# exec(decoupled=True) in the style of Triton's examples/bls_decoupled: calls the decoupled
# "square" model with IN = n and returns the n streamed values it got, in order.
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            n = pb_utils.get_input_tensor_by_name(request, "IN")
            values = []
            error = None
            for r in pb_utils.InferenceRequest(model_name="square", inputs=[n],
                                               requested_output_names=["OUT"]).exec(decoupled=True):
                if r.has_error():
                    error = r.error()
                    break
                out = pb_utils.get_output_tensor_by_name(r, "OUT")
                if out is not None:
                    values.append(int(out.as_numpy()[0]))
            if error is not None:
                responses.append(pb_utils.InferenceResponse(error=error))
            else:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array(values, dtype=np.int32))]))
        return responses
