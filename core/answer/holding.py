"""A model's prose held to the passages it read, and never shown with less than no model.

Search-then-answer (a model that can't call tools) always goes through it, and so does a
tool-calling model whose answers are grounded (`openai.ground_answers`, on by default: a small
local model's sentences without a marker would otherwise be shown unchecked). Each claim is kept
only with a marker to the passage sentence that says it (`grounding`); claims no passage
supports are left out, and the answer says so; an answer with nothing supported falls back to
quoting the passages. The top passages are quoted after it, cited or not, as the answer with no
model quotes them, and the rest the model read are listed, so sources always appear.
"""

from __future__ import annotations

from core.answer.citations import NumberedSource, SourceRegistry, checked_answer
from core.answer.extractive import consulted_sources, extractive_answer, quoted, top_documents
from core.answer.grounding import ground
from core.answer.tools import MAX_ANSWER_CHARS, RespondInput
from core.config import AnswerSettings
from core.domain.conversation import Answer, AnswerMode, AnswerStatus, Trace
from core.domain.text import finished_sentences

NOT_FOUND = "The documentation I searched does not seem to answer this."
UNSUPPORTED = (
    "The language model's answer could not be matched to the documentation, so it is not shown."
)
ALSO_QUOTED = "_The top search results, quoted as written:_"
CLOSEST_QUOTED = "_The closest passages, quoted as written:_"


def _within(text: str, limit: int, trace: Trace) -> str:
    """`text` cut at its last line break within `limit` (an answer's most), or, with none, at
    its last finished sentence: a long reply from a server allowed many tokens is shortened,
    never refused, and never cut inside a claim (half of one can pass the sentence check)."""
    if len(text) <= limit:
        return text
    trace.notes.append(f"the answer was cut to {limit:,} characters")
    head = text[:limit]
    return head[: head.rfind("\n")] if "\n" in head else finished_sentences(head)


class SourceHolding:
    def __init__(self, settings: AnswerSettings) -> None:
        self._settings = settings

    def held(
        self,
        text: str,
        numbered: list[NumberedSource],
        registry: SourceRegistry,
        trace: Trace,
        mode: AnswerMode,
        *,
        claimed: AnswerStatus | None = None,
        top: list[NumberedSource] | None = None,
    ) -> Answer:
        """`text` cut down to its supported claims, with the top passages quoted after it
        (`completed`); `claimed` is the status the model gave, when it gave one (a model that
        says it found nothing is not shown as answering)."""
        # Cut first: the check runs on the event loop (about 5 ms per 1,000 characters), and a
        # server that ignores `max_tokens` can send megabytes, which no answer shows anyway.
        text = _within(text, MAX_ANSWER_CHARS, trace)
        grounded = ground(text, numbered, self._settings.grounding)
        if grounded.unsupported:
            trace.notes.append(
                f"{grounded.unsupported} of the model's statements are not in the sources: left out"
            )
        if claimed is AnswerStatus.NOT_FOUND:
            # The model's own verdict stands: a sentence it wrote to say so ("Not covered.")
            # can share its one content word with a passage that says something else.
            answer = Answer(NOT_FOUND, AnswerStatus.NOT_FOUND, mode)
            return self.completed(answer, numbered, CLOSEST_QUOTED, top)
        if grounded.supported:
            complete = not grounded.unsupported and claimed in (None, AnswerStatus.ANSWERED)
            respond = RespondInput(
                answer=_within(grounded.text, MAX_ANSWER_CHARS, trace),
                citations=grounded.citations,
                status="answered" if complete else "partial",
            )
            # The grounding decoded the model's entities already (`ground`): not twice.
            answer = checked_answer(respond, registry, mode, decoded=True)
            return self.completed(answer, numbered, ALSO_QUOTED, top)
        if grounded.says_not_found:
            answer = Answer(NOT_FOUND, AnswerStatus.NOT_FOUND, mode)
            return self.completed(answer, numbered, CLOSEST_QUOTED, top)
        return self.quoted(top or numbered, UNSUPPORTED)

    def completed(
        self,
        answer: Answer,
        numbered: list[NumberedSource],
        intro: str,
        top: list[NumberedSource] | None = None,
    ) -> Answer:
        """`answer` followed by what the answer with no model shows, the top documents' best
        passages quoted as written (those it cites under their markers), and the rest of what
        the model read (`numbered`), listed. `top`: the results of a search for the question
        itself, where the model searched with queries of its own: the passages quoted are then
        those the answer with no model quotes, whatever the model looked for. A cited passage
        is quoted too: the sentence check compares words, not meaning, so a weak model's claim
        with one number changed or a "not" dropped can pass it, and its passage then stands
        beside it to contradict it, where hiding it behind a verified marker would show less
        than no model."""
        passages = self._settings.extractive_passages
        best = top_documents(top or numbered, passages)
        if best:
            # By passage: an answer citing a document's second passage still quotes its first,
            # which the answer with no model would have shown (by document, it did not).
            lines, citations = quoted(
                best,
                first_number=len(answer.citations) + 1,
                quote_chars=self._settings.quote_chars,
                cited={c.chunk_id: c.number for c in answer.citations},
            )
            answer.text = "\n".join([answer.text, "", intro, "", *lines]).strip()
            answer.citations += citations
            answer.sources = sorted({c.source_kind for c in answer.citations})
        answer.consulted = consulted_sources(numbered, answer.citations, passages)
        return answer

    def quoted(self, numbered: list[NumberedSource], reason: str) -> Answer:
        return extractive_answer(
            numbered,
            passages=self._settings.extractive_passages,
            quote_chars=self._settings.quote_chars,
            reason=reason,
        )
