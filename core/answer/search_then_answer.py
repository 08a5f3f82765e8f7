"""Search-then-answer: the strategy for a model that can't call tools.

We search with the user's question ourselves, put the numbered passages in the system prompt and
let the model just write. A weak model's prose then gets the tool path's contract anyway
(`grounding`): each claim it keeps is marked with the passage sentence that supports it, claims
no passage supports are left out (and the answer says so), an answer with nothing supported
falls back to quoting the passages, and an answer of markers alone is a failed turn. The top
passages the answer does not cite are quoted after it, and the rest the model read are listed,
so sources always appear and a weak model never shows less than no model would.
"""

from __future__ import annotations

from core.answer.citations import NumberedSource, SourceRegistry, checked_answer
from core.answer.extractive import (
    consulted_sources,
    extractive_answer,
    quoted,
    top_documents,
    unavailable_reason,
)
from core.answer.grounding import content_text, ground
from core.answer.prompts import NO_TOOLS_PROMPT, format_sources
from core.answer.tools import MAX_ANSWER_CHARS, RespondInput
from core.config import AnswerSettings
from core.domain.conversation import Answer, AnswerMode, AnswerStatus, Trace, Turn
from core.errors import ModelUnavailable, NoResponse
from core.ports import ChatModel

NOT_FOUND = "The documentation I searched does not seem to answer this."
UNSUPPORTED = (
    "The language model's answer could not be matched to the documentation, so it is not shown."
)
ALSO_QUOTED = "_Also in the top search results, quoted as written:_"
CLOSEST_QUOTED = "_The closest passages, quoted as written:_"


def _within(text: str, limit: int, trace: Trace) -> str:
    """`text` cut at its last line break within `limit` (an answer's most): a long reply from a
    server allowed many tokens is shortened, never refused."""
    if len(text) <= limit:
        return text
    trace.notes.append(f"the answer was cut to {limit:,} characters")
    head = text[:limit]
    return head[: head.rfind("\n")] if "\n" in head else head


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
            return self._quoted(numbered, unavailable_reason(exc, trace))
        except NoResponse as exc:
            trace.notes.append(str(exc))
            return self._quoted(numbered, f"The language model gave no usable answer ({exc}).")
        grounded = ground(text, numbered, self._settings.grounding)
        if grounded.unsupported:
            trace.notes.append(
                f"{grounded.unsupported} of the model's statements are not in the sources: left out"
            )
        if grounded.supported:
            status = "partial" if grounded.unsupported else "answered"
            respond = RespondInput(
                answer=_within(grounded.text, MAX_ANSWER_CHARS, trace),
                citations=grounded.citations,
                status=status,
            )
            # The grounding decoded the model's entities already (`ground`): not twice.
            answer = checked_answer(respond, registry, AnswerMode.SEARCH_THEN_ANSWER, decoded=True)
            return self._completed(answer, numbered, ALSO_QUOTED)
        if grounded.says_not_found:
            answer = Answer(NOT_FOUND, AnswerStatus.NOT_FOUND, AnswerMode.SEARCH_THEN_ANSWER)
            return self._completed(answer, numbered, CLOSEST_QUOTED)
        return self._quoted(numbered, UNSUPPORTED)

    def _completed(self, answer: Answer, numbered: list[NumberedSource], intro: str) -> Answer:
        """`answer` followed by the top documents' passages it does not cite, quoted (what the
        answer with no model would show), and the rest of what the model read, listed."""
        passages = self._settings.extractive_passages
        cited = {c.doc_id for c in answer.citations}
        missing = [s for s in top_documents(numbered, passages) if s.hit.chunk.doc_id not in cited]
        if missing:
            lines, citations = quoted(
                missing,
                first_number=len(answer.citations) + 1,
                quote_chars=self._settings.quote_chars,
            )
            answer.text = "\n".join([answer.text, "", intro, "", *lines]).strip()
            answer.citations += citations
            answer.sources = sorted({c.source_kind for c in answer.citations})
        answer.consulted = consulted_sources(numbered, answer.citations, passages)
        return answer

    def _quoted(self, numbered: list[NumberedSource], reason: str) -> Answer:
        return extractive_answer(
            numbered,
            passages=self._settings.extractive_passages,
            quote_chars=self._settings.quote_chars,
            reason=reason,
        )
