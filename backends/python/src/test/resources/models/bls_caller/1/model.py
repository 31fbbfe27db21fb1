# A BLS model in the style of Triton's examples/bls and qa bls_simple: it calls the model named in
# its MODEL_NAME input (any backend) with its own INPUT0/INPUT1 and returns that model's outputs.
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            target = pb_utils.get_input_tensor_by_name(request, "MODEL_NAME").as_numpy()[0]
            target = target.decode("utf-8") if isinstance(target, bytes) else str(target)
            in0 = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            in1 = pb_utils.get_input_tensor_by_name(request, "INPUT1")
            a, b = in0.as_numpy(), in1.as_numpy()
            if target.startswith("onnx"):
                a, b = a.reshape(1, -1), b.reshape(1, -1)  # the ONNX model batches: [1, 4]
            bls = pb_utils.InferenceRequest(
                model_name=target,
                inputs=[pb_utils.Tensor("INPUT0", a), pb_utils.Tensor("INPUT1", b)],
                requested_output_names=["OUTPUT0", "OUTPUT1"])
            r = bls.exec()
            if r.has_error():
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(
                    "BLS to '%s' failed (code %d): %s" % (target, r.error().code(), r.error().message()))))
                continue
            out0 = pb_utils.get_output_tensor_by_name(r, "OUTPUT0").as_numpy().reshape(a.shape[-1:])
            out1 = pb_utils.get_output_tensor_by_name(r, "OUTPUT1").as_numpy().reshape(a.shape[-1:])
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", out0), pb_utils.Tensor("OUTPUT1", out1)]))
        return responses
