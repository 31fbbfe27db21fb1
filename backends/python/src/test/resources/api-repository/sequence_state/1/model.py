# OUTPUT = STATE_IN + INPUT; STATE_OUT carries it to the next request of the sequence. START and
# CORRID are control inputs the core fills; the model checks them against the request's own view.
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            start = int(pb_utils.get_input_tensor_by_name(request, "START").as_numpy().reshape(-1)[0])
            corrid = pb_utils.get_input_tensor_by_name(request, "CORRID").as_numpy().reshape(-1)[0]
            if isinstance(corrid, bytes):
                corrid = corrid.decode()
            if start != (request.flags() & pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START) or corrid != str(request.correlation_id()):
                raise pb_utils.TritonModelException("controls %r/%r disagree with the request %r/%r"
                                                    % (start, corrid, request.flags(), request.correlation_id()))
            state = pb_utils.get_input_tensor_by_name(request, "STATE_IN").as_numpy()
            value = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            total = (state + value).astype(np.int32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", total), pb_utils.Tensor("STATE_OUT", total)]))
        return responses
