# Measures BLS round trips from inside a python model: SIZE float32 values to model TARGET, N
# times after N/10 warm-up calls; returns [p50, mean, p99] of one call in microseconds.
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            target = pb_utils.get_input_tensor_by_name(request, "TARGET").as_numpy()[0].decode("utf-8")
            n = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy()[0])
            size = int(pb_utils.get_input_tensor_by_name(request, "SIZE").as_numpy()[0])
            data = np.full([size], 1.5, dtype=np.float32)
            if target.startswith("onnx"):
                data = data.reshape(1, size)
            call = pb_utils.InferenceRequest(model_name=target, inputs=[pb_utils.Tensor("INPUT0", data)],
                                             requested_output_names=["OUTPUT0"])
            times = []
            for i in range(n + n // 10):
                t0 = time.perf_counter_ns()
                r = call.exec()
                t1 = time.perf_counter_ns()
                if r.has_error():
                    raise pb_utils.TritonModelException(r.error().message())
                if i >= n // 10:
                    times.append((t1 - t0) / 1000.0)
            out = pb_utils.get_output_tensor_by_name(r, "OUTPUT0").as_numpy()
            if out.size != size or float(out.reshape(-1)[0]) != 1.5:
                raise pb_utils.TritonModelException("wrong BLS output %s" % out.shape)
            t = np.array(times)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor(
                "STATS", np.array([np.percentile(t, 50), t.mean(), np.percentile(t, 99)], dtype=np.float64))]))
        return responses
