"""A `ChatModel` that plays a script: each turn returns the next scripted reply (or raises the
next scripted error), and every request is kept for the test to inspect."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.answer.tools import RESPOND_TOOL, SAVE_KEYWORDS_TOOL, SEARCH_TOOL, WEB_SEARCH_TOOL
from core.domain.agent import AnswerProgress, ModelTurn, ToolUse, TurnRequest
from core.domain.conversation import Trace, Turn

Reply = ModelTurn | Exception


class ScriptedChatModel:
    def __init__(
        self,
        turns: Sequence[Reply],
        *,
        forced_calls_guaranteed: bool = True,
        written: str | Exception = "",
    ) -> None:
        self._turns = list(turns)
        self.forced_calls_guaranteed = forced_calls_guaranteed
        self._written = written
        self.requests: list[TurnRequest] = []
        self.writes: list[str] = []  # the system prompt of each plain-text request

    async def turn(
        self, request: TurnRequest, trace: Trace, on_answer: AnswerProgress | None
    ) -> ModelTurn:
        self.requests.append(request)
        trace.model_calls += 1
        if not self._turns:
            raise AssertionError(f"the model was asked a turn more than scripted: {request}")
        reply = self._turns.pop(0)
        if isinstance(reply, Exception):
            raise reply
        respond = next((u for u in reply.uses if u.name == RESPOND_TOOL), None)
        if on_answer is not None and respond is not None and isinstance(respond.input, dict):
            await on_answer(str(respond.input.get("answer", "")))
        return reply

    async def write(self, system: str, history: Sequence[Turn], question: str, trace: Trace) -> str:
        self.writes.append(system)
        trace.model_calls += 1
        if isinstance(self._written, Exception):
            raise self._written
        return self._written


def _use(name: str, arguments: dict[str, Any], n: int = 0) -> ToolUse:
    return ToolUse(f"call_{name}_{n}", name, arguments)


def search_turn(query: str) -> ModelTurn:
    return ModelTurn((_use(SEARCH_TOOL, {"query": query}),))


def web_turn(query: str) -> ModelTurn:
    return ModelTurn((_use(WEB_SEARCH_TOOL, {"query": query}),))


def keywords_turn(*keywords: str) -> ModelTurn:
    return ModelTurn((_use(SAVE_KEYWORDS_TOOL, {"keywords": list(keywords)}),))


def respond_turn(answer: str, *cited: tuple[int, str], status: str = "answered") -> ModelTurn:
    citations = [{"source": number, "quote": quote} for number, quote in cited]
    arguments = {"answer": answer, "citations": citations, "status": status}
    return ModelTurn((_use(RESPOND_TOOL, arguments),))


def raw_turn(name: str, arguments: object) -> ModelTurn:
    return ModelTurn((ToolUse(f"call_{name}", name, arguments),))


def text_turn(text: str) -> ModelTurn:
    return ModelTurn((text,))
