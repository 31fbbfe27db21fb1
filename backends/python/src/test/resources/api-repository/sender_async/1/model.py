# The same behaviour as "sender", from a coroutine execute on the stub's event loop.
import asyncio

import behaviour


class TritonPythonModel:
    async def execute(self, requests):
        await asyncio.sleep(0)
        return behaviour.answer(requests, run_later=behaviour.in_task)
