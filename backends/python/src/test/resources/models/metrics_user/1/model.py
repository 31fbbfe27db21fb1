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
        out += self._lifetime_and_argument_rules()
        self._keep = (fam, g1)
        return out

    @staticmethod
    def _raises(call, text):
        """'ok' if call() raises TritonModelException whose message holds text, else what happened."""
        try:
            call()
        except pb_utils.TritonModelException as e:
            return "ok" if text in str(e) else "message %r lacks %r" % (str(e), text)
        return "no exception, expected %r" % text

    def _lifetime_and_argument_rules(self):
        out = []
        # Deleting a family deletes the metrics created through it (Triton's MetricFamily owns them).
        family = pb_utils.MetricFamily(name="bp_test_lifetime", description="deleted before its metric", kind=pb_utils.GAUGE)
        orphan = family.Metric(labels={"k": "v"})
        orphan.set(2)
        del family
        deleted = "Invalid metric operation as the corresponding 'MetricFamily' has been deleted."
        out.append(self._raises(lambda: orphan.set(10), "Failed to set metric value: " + deleted))
        out.append(self._raises(lambda: orphan.increment(10), "Failed to increment metric value: " + deleted))
        out.append(self._raises(lambda: orphan.value(), "Failed to get metric value: " + deleted))
        # Histograms: buckets required (a list; [] means only +Inf); no value().
        hist = pb_utils.MetricFamily(name="bp_test_inf_only", description="buckets=[]", kind=pb_utils.HISTOGRAM)
        out.append(self._raises(lambda: hist.Metric(labels={}), "Failed to create metric. Missing required buckets."))
        out.append(self._raises(lambda: hist.Metric(labels={}, buckets=None), "Failed to create metric. Missing required buckets."))
        out.append(self._raises(lambda: hist.Metric(labels={}, buckets=(1.0, 2.0)), "Failed to create metric. Buckets must be a list."))
        out.append(self._raises(lambda: hist.Metric(labels=[("k", "v")], buckets=[]), "Failed to create metric. Labels must be a dictionary."))
        out.append(self._raises(lambda: hist.Metric(labels={}, buckets=[2.5, 0.1]), "Error when creating Metric: "))
        out.append(self._raises(lambda: hist.Metric(labels={}, buckets=[1, 1, 2]), "Error when creating Metric: "))
        inf_only = hist.Metric(labels={}, buckets=[])
        inf_only.observe(3.0)
        out.append(self._raises(lambda: inf_only.value(), "Failed to get metric value: Unsupported TRITONSERVER_MetricKind"))
        out.append(self._raises(lambda: inf_only.increment(1), "Failed to increment metric value: "))
        out.append(self._raises(lambda: inf_only.set(1), "Failed to set metric value: "))
        out.append(self._raises(lambda: self.counter.observe(1), "Failed to observe metric value: "))
        out.append(self._raises(lambda: self.requests.Metric(labels={}, buckets=[1.0]), "Failed to create metric. Unexpected buckets found."))
        self._keep_histogram = (hist, inf_only)
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
