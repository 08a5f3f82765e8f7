"""A chat-completions endpoint that is slow on purpose: what a shutdown drains."""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

from core.answer.tools import RESPOND_TOOL, SEARCH_TOOL


class SlowChatServer:
    """An OpenAI-compatible chat endpoint that takes `delay_s` to answer each call: a search
    first (the forced first round), then a `respond`."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.calls = 0
        self.app = web.Application()
        self.app.router.add_post("/v1/chat/completions", self._complete)

    async def _complete(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.calls += 1
        await asyncio.sleep(self.delay_s)
        searched = body["messages"][-1]["role"] == "tool"
        name, args = (
            (RESPOND_TOOL, {"answer": "The slow answer.", "citations": [], "status": "partial"})
            if searched
            else (SEARCH_TOOL, {"query": "slow"})
        )
        call = {
            "id": "c1",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return web.json_response({"choices": [{"index": 0, "message": message}], "usage": {}})
