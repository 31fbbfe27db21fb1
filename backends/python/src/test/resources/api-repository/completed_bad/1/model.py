# auto_complete_config fails with a Python error: the load fails and says why.
class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        auto_complete_model_config.add_input({"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]})
        undefined_variable  # noqa: F821
        return auto_complete_model_config

    def execute(self, requests):
        return None
