"""Search-then-answer: the strategy for a model that can't call tools.

We search with the user's question ourselves, put the numbered passages in the system prompt and
let the model just write; the answer goes through the same checks as a tool-using model's. So
sources always appear, whatever the model can do.
"""

from __future__ import annotations

from core.answer.citations import NumberedSource, SourceRegistry, checked_answer
from core.answer.extractive import extractive_answer, unavailable_reason
from core.answer.prompts import NO_TOOLS_PROMPT, format_sources
from core.answer.tools import RespondInput
from core.config import AnswerSettings
from core.domain.conversation import Answer, AnswerMode, Trace, Turn
from core.errors import ModelUnavailable, NoResponse
from core.ports import ChatModel


class SearchThenAnswer:
    def __init__(self, model: ChatModel, settings: AnswerSettings) -> None:
        self._model = model
        self._settings = settings

    async def answer(
        self,
        question: str,
        history: list[Turn],
        numbered: list[NumberedSource],
        registry: SourceRegistry,
        trace: Trace,
    ) -> Answer:
        """The model's answer from `numbered` (already searched and registered); quoted
        passages when the model can't be used."""
        system = f"{NO_TOOLS_PROMPT}\n{format_sources(question, numbered)}"
        try:
            text = await self._model.write(system, history, question, trace)
            if not text.strip():
                raise NoResponse("the model returned an empty answer")
        except (ModelUnavailable, NoResponse) as exc:
            return extractive_answer(
                numbered,
                passages=self._settings.extractive_passages,
                quote_chars=self._settings.quote_chars,
                reason=unavailable_reason(exc, trace),
            )
        status = "answered" if numbered else "not_found"
        respond = RespondInput(answer=text, citations=[], status=status)
        return checked_answer(respond, registry, AnswerMode.SEARCH_THEN_ANSWER)
