# readiness with a coroutine is_ready (Triton supports both); otherwise as readiness. The
# config parameters READINESS_FN_RETURN_VALUE ("true", "false", "exception", "non_boolean", "file":
# ready while the file 'ready' exists in the model's folder, or "gate": True once the file 'release'
# exists) and READINESS_FN_DELAY_SECS decide what is_ready() does; each call appends a line to the
# file 'checks'. With FAIL_RESTART "1" a restarted stub's initialize() fails until the file
# 'allow_restart' exists. execute() is an identity on INPUT0 whatever is_ready() says.
import asyncio
import json
import os

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"]).get("parameters", {})
        self.value = params.get("READINESS_FN_RETURN_VALUE", {}).get("string_value", "true")
        self.delay = float(params.get("READINESS_FN_DELAY_SECS", {}).get("string_value", "0"))
        self.dir = args["model_repository"]
        self.flag = os.path.join(self.dir, "ready")
        if params.get("FAIL_RESTART", {}).get("string_value") == "1":
            started = os.path.join(self.dir, "started")
            if os.path.exists(started) and not os.path.exists(os.path.join(self.dir, "allow_restart")):
                raise RuntimeError("this model starts once (FAIL_RESTART); create 'allow_restart' to let it restart")
            open(started, "w").close()

    async def verdict(self):
        with open(os.path.join(self.dir, "checks"), "a") as f:
            f.write("check\n")
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.value == "exception":
            raise ValueError("readiness check failed on purpose")
        if self.value == "non_boolean":
            return "yes"
        if self.value == "file":
            return os.path.exists(self.flag)
        if self.value == "gate":
            for _ in range(3000):
                if os.path.exists(os.path.join(self.dir, "release")):
                    return True
                await asyncio.sleep(0.01)
            return False
        return self.value == "true"

    async def is_ready(self):
        return await self.verdict()

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())])
                for r in requests]
