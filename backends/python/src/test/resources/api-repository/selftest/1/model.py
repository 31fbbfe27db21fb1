# Runs a unittest suite inside the stub, the way Triton's qa models (dlpack_test, ...) do: unittest.main("model")
# parses sys.argv, which must be the model's, not the stub's.
import io
import unittest

import numpy as np

import triton_python_backend_utils as pb_utils


class PbUtilsTest(unittest.TestCase):
    def test_dlpack_refuses_strings(self):
        with self.assertRaises(Exception) as e:
            pb_utils.Tensor("t", np.array(["text"], dtype=np.object_)).to_dlpack()
        self.assertEqual(str(e.exception), "DLPack does not have support for string tensors.")

    def test_dlpack_refuses_non_contiguous(self):
        with self.assertRaises(Exception) as e:
            pb_utils.Tensor.from_dlpack("t", np.ones((3, 4), dtype=np.float32).T)
        self.assertEqual(str(e.exception), "DLPack tensor is not contiguous. Only contiguous DLPack tensors that are "
                                           "stored in C-Order are supported.")

    def test_dlpack_round_trip_shares_memory(self):
        a = np.arange(4, dtype=np.int64)
        t = pb_utils.Tensor.from_dlpack("t", pb_utils.Tensor("a", a))
        a[0] = 42
        self.assertEqual(t.as_numpy()[0], 42)
        self.assertTrue(np.array_equal(np.from_dlpack(t), a))
        self.assertEqual(t.__dlpack_device__(), (1, 0))
        self.assertTrue(np.array_equal(pb_utils.Tensor.from_dlpack("b", t.to_dlpack()).as_numpy(), a))

    def test_bool_and_empty_tensors(self):
        b = np.array([False, True])
        self.assertTrue(np.array_equal(pb_utils.Tensor.from_dlpack("b", pb_utils.Tensor("b", b)).as_numpy(), b))
        empty = pb_utils.Tensor.from_dlpack("e", np.zeros((0, 3), dtype=np.float32))
        self.assertEqual(empty.shape(), [0, 3])

    def test_auto_complete_config_rules(self):
        config = pb_utils.ModelConfig({"name": "m", "max_batch_size": 4,
                                       "input": [{"name": "A", "data_type": "TYPE_FP32", "dims": [2]}]})
        with self.assertRaises(ValueError) as e:
            config.set_max_batch_size(2)
        self.assertIn("configuration specified max_batch_size 4", str(e.exception))
        with self.assertRaises(ValueError) as e:
            config.add_input({"name": "A", "data_type": "TYPE_INT32", "dims": [2]})
        self.assertIn("configuration expects datatype TYPE_FP32 for input 'A', model provides TYPE_INT32", str(e.exception))
        with self.assertRaises(ValueError) as e:
            config.add_output({"name": "B", "data_type": "TYPE_FP32"})
        self.assertIn("is missing 'dims' property", str(e.exception))
        with self.assertRaises(ValueError):
            config.set_model_transaction_policy({"streaming": True})
        config.add_input({"name": "A", "data_type": "TYPE_FP32", "dims": [2]})
        self.assertEqual(len(config.as_dict()["input"]), 1)

    def test_error_codes_and_log_levels(self):
        codes = [pb_utils.TritonError.UNKNOWN, pb_utils.TritonError.INTERNAL, pb_utils.TritonError.NOT_FOUND,
                 pb_utils.TritonError.INVALID_ARG, pb_utils.TritonError.UNAVAILABLE, pb_utils.TritonError.UNSUPPORTED,
                 pb_utils.TritonError.ALREADY_EXISTS, pb_utils.TritonError.CANCELLED]
        self.assertEqual(codes, list(range(8)))
        self.assertEqual(pb_utils.TritonError("x").code(), pb_utils.TritonError.INTERNAL)
        for level in (pb_utils.LogLevel.INFO, pb_utils.LogLevel.WARNING, pb_utils.LogLevel.ERROR, pb_utils.LogLevel.VERBOSE):
            pb_utils.Logger.log("selftest log line", level)
        self.assertTrue(issubclass(pb_utils.TritonModelException, Exception))

    def test_logger_level_constants(self):
        # Triton's binding nests LogLevel in Logger and exports its values there.
        logger = pb_utils.Logger
        self.assertIs(logger.LogLevel, pb_utils.LogLevel)
        for name, value in (("INFO", 0), ("WARNING", 1), ("ERROR", 2), ("VERBOSE", 3)):
            level = getattr(logger, name)
            self.assertIs(level, getattr(pb_utils.LogLevel, name))
            self.assertEqual(int(level), value)
            logger.log("selftest %s line" % name, level)
        logger.log("keyword level", level=logger.WARNING)

    def test_parameters_types_and_texts(self):
        # Triton's PyParametersToJSON: str keys; bool, int or str values; a dict or None.
        def request(parameters):
            return pb_utils.InferenceRequest(model_name="m", inputs=[], requested_output_names=[], parameters=parameters)

        def response(parameters):
            return pb_utils.InferenceResponse([], parameters=parameters)

        for make in (request, response):
            for bad, text in (({"int": 2, "float": 0.5}, "Expect parameters values to have type bool/int/str, found type <class 'float'>"),
                              ({"bool": True, "null": None}, "Expect parameters values to have type bool/int/str, found type <class 'NoneType'>"),
                              ({"str": "", "list": ["variable"]}, "Expect parameters values to have type bool/int/str, found type <class 'list'>"),
                              ({"nested": {"no": 1}}, "Expect parameters values to have type bool/int/str, found type <class 'dict'>"),
                              ({1: "int key"}, "Expect parameters keys to have type str, found type <class 'int'>"),
                              ([], ", got <class 'list'>"),
                              ('{"a": 1}', ", got <class 'str'>")):
                with self.assertRaises(pb_utils.TritonModelException, msg="%s %r" % (make.__name__, bad)) as e:
                    make(bad)
                self.assertIn(text, str(e.exception))
            good = {"a": "1", "c": 3, "d": False, "f": ""}
            self.assertEqual(make(good).parameters(), '{"a": "1", "c": 3, "d": false, "f": ""}')
            self.assertEqual(make({}).parameters(), "{}")
            self.assertEqual(make(None).parameters(), "{}")

    def test_argument_validation_as_tritons_binding(self):
        # What Triton's binding answers for a None or a wrong type: a TypeError, except where its own code checks
        # (a None among the inputs or output tensors, from_dlpack of None: TritonModelException).
        t = pb_utils.Tensor("IN", np.asarray([1, 2], dtype=np.int32))
        with self.assertRaises(pb_utils.TritonModelException):
            pb_utils.InferenceRequest(model_name="m", inputs=[None], requested_output_names=["OUT"])
        for bad in ({"inputs": None}, {"requested_output_names": None}, {"requested_output_names": [None]},
                    {"correlation_id": None}, {"request_id": None}, {"model_version": None}, {"flags": None}):
            kwargs = dict(model_name="m", inputs=[t], requested_output_names=["OUT"])
            kwargs.update(bad)
            with self.assertRaises(TypeError, msg=str(bad)):
                pb_utils.InferenceRequest(**kwargs)
        with self.assertRaises(TypeError):
            pb_utils.InferenceRequest(model_name=None, inputs=[t], requested_output_names=["OUT"])
        self.assertEqual(pb_utils.InferenceRequest(model_name="m", inputs=[], requested_output_names=[]).correlation_id(), 0)
        self.assertEqual(pb_utils.InferenceRequest(model_name="m", inputs=[t], requested_output_names=["OUT"],
                                                   correlation_id="s-5").correlation_id(), "s-5")
        pb_utils.InferenceRequest(model_name="m", inputs=[t], requested_output_names=["OUT"], model_version=np.int64(1))

        with self.assertRaises(pb_utils.TritonModelException):
            pb_utils.InferenceResponse(output_tensors=[None])
        with self.assertRaises(TypeError):
            pb_utils.InferenceResponse(output_tensors=None)
        pb_utils.InferenceResponse(output_tensors=[])
        pb_utils.InferenceResponse(error=pb_utils.TritonError("an error alone"))

        for name, data in ((None, np.ones(2)), ("OUT", None), ("", None)):
            with self.assertRaises(TypeError):
                pb_utils.Tensor(name, data)
        for name in ("OUT", ""):
            with self.assertRaises(pb_utils.TritonModelException):
                pb_utils.Tensor.from_dlpack(name, None)

        for call in (lambda: pb_utils.Logger.log("x", None), lambda: pb_utils.Logger.log("x", 1),
                     lambda: pb_utils.Logger.log_info(None), lambda: pb_utils.Logger.log_warn(None),
                     lambda: pb_utils.Logger.log_error(None), lambda: pb_utils.Logger.log_verbose(None)):
            with self.assertRaises(TypeError):
                call()
        pb_utils.Logger.log("level unspecified")


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for _ in requests:
            report = io.StringIO()
            program = unittest.main("model", exit=False, testRunner=unittest.TextTestRunner(stream=report, verbosity=2))
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("PASSED", np.array([program.result.wasSuccessful()])),
                pb_utils.Tensor("REPORT", np.array([report.getvalue()], dtype=np.object_))]))
        return responses
