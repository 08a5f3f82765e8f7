"""A local stand-in for Perplexity's chat-completions API (aiohttp on a real socket), for the
real httpx client: scripted answers with citations and search results, HTTP errors, slow
answers that trip the client's timeout, and a record of every request it received."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

API_KEY = "pplx-test-key"
_ids = itertools.count(1)


@dataclass(frozen=True)
class Page:
    url: str
    title: str
    text: str  # what the answer says about it (each sentence is cited to this page)


def completion(pages: list[Page], *, preface: str = "") -> dict[str, Any]:
    """A realistic response: every sentence of each page's text cited `[n]` after its full
    stop, `citations` with the URLs, `search_results` with titles and snippets."""
    sentences = [preface] if preface else []
    for number, page in enumerate(pages, start=1):
        for sentence in page.text.replace("\n", " ").split(". "):
            sentence = sentence.strip().rstrip(".")
            if sentence:
                sentences.append(f"{sentence}.[{number}]")
    return {
        "id": f"pplx-{next(_ids)}",
        "model": "sonar",
        "object": "chat.completion",
        "created": 1_800_000_000,
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": " ".join(sentences)},
            }
        ],
        "citations": [p.url for p in pages],
        "search_results": [
            {"title": p.title, "url": p.url, "date": "2026-10-01", "snippet": p.text[:200]}
            for p in pages
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 80, "total_tokens": 92},
    }


Reply = dict[str, Any] | tuple[int, dict[str, Any]] | Callable[[dict[str, Any]], Any]


class PerplexityFake:
    """`replies` are used in order; `default` answers when they run out (None: a 500)."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.default: Reply | None = None
        self.delay_s = 0.0
        self.requests: list[dict[str, Any]] = []
        self.app = web.Application()
        self.app.router.add_post("/chat/completions", self._handle)
        self.url = ""

    @property
    def queries(self) -> list[str]:
        return [r["messages"][-1]["content"] for r in self.requests]

    async def _handle(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {API_KEY}":
            return web.json_response({"error": {"message": "Invalid API key"}}, status=401)
        body = await request.json()
        self.requests.append(body)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        reply = self.replies.pop(0) if self.replies else self.default
        if callable(reply):
            reply = reply(body)
        if reply is None:
            return web.json_response({"error": {"message": "no reply scripted"}}, status=500)
        status, payload = reply if isinstance(reply, tuple) else (200, reply)
        return web.json_response(payload, status=status)


@asynccontextmanager
async def perplexity_server() -> AsyncIterator[PerplexityFake]:
    fake = PerplexityFake()
    server = TestServer(fake.app, host="127.0.0.1")
    await server.start_server()
    fake.url = str(server.make_url("")).rstrip("/")
    try:
        yield fake
    finally:
        await server.close()
