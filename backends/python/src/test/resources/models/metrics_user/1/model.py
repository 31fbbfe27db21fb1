# Custom metrics in the style of Triton's examples/custom_metrics and qa custom_metrics: a counter
# and a histogram created in initialize(), updated per request; OP selects checks of Triton's rules.
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.requests = pb_utils.MetricFamily(name="bp_test_requests_total", description="requests seen by metrics_user",
                                              kind=pb_utils.MetricFamily.COUNTER)
        self.sizes = pb_utils.MetricFamily(name="bp_test_input_size", description="input sizes",
                                           kind=pb_utils.MetricFamily.HISTOGRAM)
        self.counter = self.requests.Metric(labels={"model": args["model_name"], "version": args["model_version"]})
        self.histogram = self.sizes.Metric(labels={"model": args["model_name"]}, buckets=[1, 4, 16])

    def _rules(self):
        """Triton's rules; returns a list of strings, one per check, 'ok' or what went wrong."""
        out = []
        fam = pb_utils.MetricFamily(name="bp_test_gauge", description="first description", kind=pb_utils.GAUGE)
        same = pb_utils.MetricFamily(name="bp_test_gauge", description="second description", kind=pb_utils.GAUGE)
        g1 = fam.Metric(labels={"k": "v"})
        g2 = same.Metric(labels={"k": "v"})
        g1.set(5.5)
        g1.increment(-1.5)
        out.append("ok" if g2.value() == 4.0 else "shared series value %r" % g2.value())
        try:
            pb_utils.MetricFamily(name="bp_test_gauge", description="x", kind=pb_utils.COUNTER)
            out.append("a second kind was accepted")
        except pb_utils.TritonModelException as e:
            out.append("ok" if "already exists with kind GAUGE" in str(e) else str(e))
        try:
            self.counter.increment(-1)
            out.append("a counter went down")
        except pb_utils.TritonModelException:
            out.append("ok")
        try:
            self.counter.set(3)
            out.append("a counter was set")
        except pb_utils.TritonModelException:
            out.append("ok")
        self._keep = (fam, g1)
        return out

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            self.counter.increment(1)
            self.histogram.observe(float(x.size))
            if int(x.reshape(-1)[0]) < 0:
                result = self._rules()
            else:
                result = ["%g" % self.counter.value()]
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.array(result, dtype=np.object_))]))
        return responses
