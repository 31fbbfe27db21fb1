"""``pb_utils.ModelConfig``: what ``TritonPythonModel.auto_complete_config`` receives and returns.

It wraps the model configuration in Triton's JSON form. A model may fill what its config.pbtxt
left out (inputs, outputs, max_batch_size, dynamic batching, the transaction policy); it may not
contradict what the config.pbtxt states. The error texts follow Triton's.
"""

import json

_TENSOR_PROPERTIES = ("name", "data_type", "dims", "optional")


class ModelConfig:
    def __init__(self, model_config, declared_decoupled=None):
        self._declared_decoupled = declared_decoupled  # True when the config.pbtxt makes the model decoupled
        self._model_config = json.loads(model_config) if isinstance(model_config, str) else dict(model_config)
        self._model_config.setdefault("input", [])
        self._model_config.setdefault("output", [])
        self._model_config.setdefault("max_batch_size", 0)

    def as_dict(self):
        return self._model_config

    def _name(self):
        return str(self._model_config.get("name", ""))

    def set_max_batch_size(self, max_batch_size):
        if not isinstance(max_batch_size, int) or isinstance(max_batch_size, bool) or max_batch_size < 0:
            raise ValueError("max_batch_size in auto-complete-config function for model '%s' must be a whole number "
                             ">= 0, got %r" % (self._name(), max_batch_size))
        current = int(self._model_config.get("max_batch_size", 0))
        if current > max_batch_size:
            raise ValueError("configuration specified max_batch_size %d, but in auto-complete-config function for "
                             "model '%s' specified max_batch_size %d" % (current, self._name(), max_batch_size))
        self._model_config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self):
        for other in ("sequence_batching", "ensemble_scheduling"):
            if other in self._model_config:
                raise ValueError("Configuration specified scheduling_choice as '%s', but auto-complete-config function "
                                 "for model '%s' tries to set scheduling_choice as 'dynamic_batching'"
                                 % (other, self._name()))
        self._model_config.setdefault("dynamic_batching", {})

    def set_model_transaction_policy(self, transaction_policy_dict):
        if not isinstance(transaction_policy_dict, dict):
            raise ValueError("model transaction policy in auto-complete-config function for model '%s' must be a "
                             "dict such as {'decoupled': True}" % self._name())
        for key in transaction_policy_dict:
            if key != "decoupled":
                raise ValueError("model transaction property in auto-complete-config function for model '%s' contains "
                                 "property other than 'decoupled'" % self._name())
        policy = self._model_config.setdefault("model_transaction_policy", {})
        if "decoupled" in transaction_policy_dict:
            wanted = bool(transaction_policy_dict["decoupled"])
            if self._declared_decoupled and not wanted:
                raise ValueError("trying to change decoupled property in auto-complete-config for model '%s', which is "
                                 "already set to 'True'" % self._name())
            policy["decoupled"] = wanted

    def add_input(self, input):
        self._add("input", input)

    def add_output(self, output):
        self._add("output", output)

    def _add(self, kind, tensor):
        if not isinstance(tensor, dict):
            raise ValueError("%s in auto-complete-config function for model '%s' must be a dict with 'name', "
                             "'data_type' and 'dims'" % (kind, self._name()))
        for prop in tensor:
            if prop not in _TENSOR_PROPERTIES:
                raise ValueError("%s '%s' in auto-complete-config function for model '%s' contains property other than "
                                 "'name', 'data_type', 'dims' and 'optional'." % (kind, tensor.get("name", ""), self._name()))
        for prop in ("name", "data_type", "dims"):
            if prop not in tensor:
                if prop == "name":
                    raise ValueError("%s in auto-complete-config function for model '%s' is missing 'name' property."
                                     % (kind, self._name()))
                raise ValueError("%s '%s' in auto-complete-config function for model '%s' is missing '%s' property."
                                 % (kind, tensor["name"], self._name(), prop))
        if kind == "output" and "optional" in tensor:
            raise ValueError("output '%s' in auto-complete-config function for model '%s' contains property 'optional', "
                             "which only inputs have." % (tensor["name"], self._name()))
        for current in self._model_config[kind]:
            if current.get("name") != tensor["name"]:
                continue
            declared_type = current.get("data_type", "TYPE_INVALID")
            if declared_type not in ("TYPE_INVALID", "", None) and declared_type != tensor["data_type"]:
                raise ValueError("unable to load model '%s', configuration expects datatype %s for %s '%s', model "
                                 "provides %s" % (self._name(), declared_type, kind, tensor["name"], tensor["data_type"]))
            if current.get("dims") and list(current["dims"]) != list(tensor["dims"]):
                raise ValueError("model '%s', tensor '%s': the model expects dims %s but the model configuration "
                                 "specifies dims %s" % (self._name(), tensor["name"], list(tensor["dims"]),
                                                        list(current["dims"])))
            current["data_type"] = tensor["data_type"]
            current["dims"] = list(tensor["dims"])
            if "optional" in tensor:
                current["optional"] = bool(tensor["optional"])
            return
        entry = {"name": tensor["name"], "data_type": tensor["data_type"], "dims": list(tensor["dims"])}
        if "optional" in tensor:
            entry["optional"] = bool(tensor["optional"])
        self._model_config[kind].append(entry)
