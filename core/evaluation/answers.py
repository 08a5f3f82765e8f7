"""End-to-end answer quality: ask every question through the engine, score the citations.

The citation hit rate is the share of questions whose answer cites at least one gold passage:
what a user clicking the first link experiences; the source hit rate counts the sources consulted
too (every link under the answer). Honesty is measured beside it: how many answers show sources
at all, and how many claims are shown without a citation (a claim is a sentence as the grounding
check reads it; passages quoted as written are the sources themselves and not counted). With a
model judge (a real key), answers are also graded against the dataset's reference answers. Each
question's time is kept.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.answer.engine import AnswerEngine
from core.answer.grounding import units
from core.config import GroundingSettings
from core.domain.conversation import Answer, AnswerMode, AnswerStatus, ChannelKind, Question
from core.evaluation.retrieval import Dataset, beir_url, jsonl_objects
from core.ports import Judge

JUDGE_PROMPT = """\
Grade an answer against a reference answer. Reply with exactly one word: CORRECT if the answer \
states the substance of the reference without contradicting it, otherwise INCORRECT.

<question>{question}</question>
<reference>{reference}</reference>
<answer>{answer}</answer>"""


class ClaudeJudge:
    def __init__(self, client: Any, model: str) -> None:
        self._client = client
        self._model = model

    async def is_correct(self, question: str, reference: str, answer: str) -> bool:
        prompt = JUDGE_PROMPT.format(question=question, reference=reference, answer=answer)
        response = await self._client.messages.create(
            model=self._model,
            max_tokens=5,
            messages=[{"role": "user", "content": prompt}],
        )
        verdict = "".join(getattr(b, "text", "") for b in response.content).strip().upper()
        return verdict.startswith("CORRECT")


def load_references(folder: Path) -> dict[str, str]:
    path = folder / "answers.jsonl"
    if not path.exists():
        return {}
    return {str(r["_id"]): str(r.get("answer") or "") for _, r in jsonl_objects(path)}


@dataclass(slots=True)
class AnswerEvaluation:
    questions: int = 0
    citation_hits: int = 0
    retrieval_hits: int = 0
    cited_total: int = 0
    cited_gold: int = 0
    graded: int = 0
    correct: int = 0
    source_hits: int = 0
    sources_shown: int = 0
    uncited_claims: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    modes: dict[str, int] = field(default_factory=dict)
    own_ms: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    rows: list[dict[str, object]] = field(default_factory=list)

    def summary(self) -> dict[str, object]:
        def rate(part: int, whole: int) -> float | None:
            return round(part / whole, 4) if whole else None

        return {
            "questions": self.questions,
            "citation_hit_rate": rate(self.citation_hits, self.questions),
            "source_hit_rate": rate(self.source_hits, self.questions),
            "retrieval_hit_rate_same_depth": rate(self.retrieval_hits, self.questions),
            "citation_precision": rate(self.cited_gold, self.cited_total),
            "sources_present_rate": rate(self.sources_shown, self.questions),
            "uncited_claims_shown": self.uncited_claims,
            "answer_correctness": rate(self.correct, self.graded),
            "graded": self.graded,
            "statuses": self.statuses,
            "modes": self.modes,
            "own_ms_p50": round(statistics.median(self.own_ms), 2) if self.own_ms else None,
            "seconds_p50": _percentile(self.seconds, 50),
            "seconds_p95": _percentile(self.seconds, 95),
            "seconds_max": round(max(self.seconds), 3) if self.seconds else None,
        }


def _percentile(values: list[float], pct: int) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return round(values[0], 3)
    return round(statistics.quantiles(values, n=100, method="inclusive")[pct - 1], 3)


def uncited_claims(answer: Answer, grounding: GroundingSettings) -> int:
    """Claims shown as part of an answer without a citation marker. Quoted passages
    (extractive) are the sources themselves; a not_found or error answer claims nothing."""
    if answer.mode is AnswerMode.EXTRACTIVE or answer.status in (
        AnswerStatus.NOT_FOUND,
        AnswerStatus.ERROR,
    ):
        return 0
    # Lines quoted as `> ...` are passages quoted as written, under a cited heading.
    said = "\n".join(line for line in answer.text.split("\n") if not line.startswith(">"))
    return sum(1 for u in units(said, grounding) if u.claim and not u.markers)


async def evaluate_answers(
    engine: AnswerEngine,
    dataset: Dataset,
    *,
    references: dict[str, str],
    judge: Judge | None,
    grounding: GroundingSettings,
) -> AnswerEvaluation:
    """`grounding`: the settings the answers were grounded with, so a claim is read the same."""
    result = AnswerEvaluation()
    doc_of = {beir_url(doc_id): doc_id for doc_id in dataset.corpus}
    for query_id, text in dataset.queries.items():
        gold = dataset.qrels[query_id]
        answer = await engine.answer(
            Question("eval", f"eval/{dataset.name}/{query_id}", "eval", text, ChannelKind.DIRECT)
        )
        cited = {doc_of[c.url] for c in answer.citations if c.url in doc_of}
        shown = cited | {doc_of[c.url] for c in answer.consulted if c.url in doc_of}
        result.questions += 1
        result.source_hits += bool(shown & gold.keys())
        result.sources_shown += bool(answer.citations or answer.consulted)
        uncited = uncited_claims(answer, grounding)
        result.uncited_claims += uncited
        result.seconds.append(answer.trace.total_seconds)
        result.rows.append(
            {
                "id": query_id,
                "status": answer.status.value,
                "mode": answer.mode.value,
                "seconds": round(answer.trace.total_seconds, 3),
                "model_seconds": round(answer.trace.model_seconds, 3),
                "citation_hit": bool(cited & gold.keys()),
                "source_hit": bool(shown & gold.keys()),
                "citations": len(answer.citations),
                "consulted": len(answer.consulted),
                "uncited_claims": uncited,
                "notes": answer.trace.notes,
            }
        )
        result.cited_total += len(cited)
        result.cited_gold += len(cited & gold.keys())
        result.citation_hits += bool(cited & gold.keys())
        # What retrieval alone finds at the same depth: the documents the answer could cite.
        depth = max(1, len(answer.citations))
        hits = await engine.search(text)
        top_docs = list(dict.fromkeys(h.chunk.doc_id for h in hits))[:depth]
        result.retrieval_hits += bool(set(top_docs) & gold.keys())
        result.statuses[answer.status.value] = result.statuses.get(answer.status.value, 0) + 1
        result.modes[answer.mode.value] = result.modes.get(answer.mode.value, 0) + 1
        result.own_ms.append(answer.trace.own_seconds * 1000)
        if judge is not None and query_id in references:
            result.graded += 1
            result.correct += await judge.is_correct(text, references[query_id], answer.text)
    return result
