"""Search-then-answer: the strategy for a model that can't call tools.

We search with the user's question ourselves, put the numbered passages in the system prompt and
let the model just write. A weak model's prose then gets the tool path's contract anyway
(`holding`): each claim it keeps is marked with the passage sentence that supports it, claims
no passage supports are left out, an answer with nothing supported falls back to quoting the
passages, an answer of markers alone is a failed turn, and sources always appear: a weak model
never shows less than no model would.
"""

from __future__ import annotations

from core.answer.citations import NumberedSource, SourceRegistry
from core.answer.extractive import unavailable_reason
from core.answer.grounding import content_text
from core.answer.holding import NOT_FOUND, SourceHolding
from core.answer.prompts import NO_TOOLS_PROMPT, format_sources
from core.config import AnswerSettings
from core.domain.conversation import Answer, AnswerMode, AnswerStatus, Trace, Turn
from core.errors import ModelUnavailable, NoResponse
from core.ports import ChatModel


class SearchThenAnswer:
    def __init__(self, model: ChatModel, settings: AnswerSettings) -> None:
        self._model = model
        self._holding = SourceHolding(settings)

    async def answer(
        self,
        question: str,
        history: list[Turn],
        numbered: list[NumberedSource],
        registry: SourceRegistry,
        trace: Trace,
    ) -> Answer:
        """The model's answer from `numbered` (already searched and registered), held to its
        sources, with the top passages it does not cite quoted after it: never less than the
        answer with no model. Only quoted passages when the model can't be used or says
        nothing they support."""
        if not numbered:  # nothing to answer from: no slow model call to learn that
            return Answer(NOT_FOUND, AnswerStatus.NOT_FOUND, AnswerMode.SEARCH_THEN_ANSWER)
        system = f"{NO_TOOLS_PROMPT}\n{format_sources(question, numbered)}"
        try:
            text = await self._model.write(system, history, question, trace)
            if not content_text(text):
                said = "only citation markers" if text.strip() else "an empty answer"
                raise NoResponse(f"the model returned {said}")
        except ModelUnavailable as exc:
            return self._holding.quoted(numbered, unavailable_reason(exc, trace))
        except NoResponse as exc:
            trace.notes.append(str(exc))
            return self._holding.quoted(
                numbered, f"The language model gave no usable answer ({exc})."
            )
        return self._holding.held(text, numbered, registry, trace, AnswerMode.SEARCH_THEN_ANSWER)
