"""Feedback becomes tests: the questions people voted on, with the documents the answers cited,
as BEIR-layout datasets `bot eval answers` replays.

Two datasets, because a vote says different things:
- `liked/`: questions whose answers were voted up. The documents cited are the judgements (an
  answer should cite them again: the citation hit rate should stay high), and the liked answer
  is the reference a judge grades a new answer against (`answers.jsonl`).
- `disliked/`: questions whose answers were voted down, with the 👎 reasons. The documents
  cited then are the judgements too, but of what people rejected: here the citation hit rate
  is the share of questions still answered from the same passages, and should fall as the docs
  and the bot improve.

The corpus of each is the full text of every cited document, as the index holds it now, so the
replay runs anywhere (CI included) without the team's whole knowledge base.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.domain.documents import SearchFilters
from core.domain.insights import LoggedAnswer
from core.errors import DatasetError
from core.ports import SearchIndex

LIKED, DISLIKED = "liked", "disliked"


@dataclass(frozen=True, slots=True)
class ExportCounts:
    liked: int
    disliked: int
    documents: int
    skipped: dict[str, int]  # reason -> answers left out


async def export_feedback(
    entries: Sequence[LoggedAnswer], index: SearchIndex, folder: Path, min_votes: int
) -> ExportCounts:
    chosen: dict[str, list[LoggedAnswer]] = {LIKED: [], DISLIKED: []}
    skipped: dict[str, int] = {}
    for entry in entries:
        if max(entry.up, entry.down) < min_votes:
            continue
        reason = _unusable(entry)
        if reason:
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        chosen[LIKED if entry.up > entry.down else DISLIKED].append(entry)
    cited = {c.doc_id for group in chosen.values() for e in group for c in e.citations}
    corpus = await _documents(index, cited)
    for name, group in chosen.items():
        _write(folder / name, group, corpus, name == LIKED)
    return ExportCounts(len(chosen[LIKED]), len(chosen[DISLIKED]), len(corpus), skipped)


def _unusable(entry: LoggedAnswer) -> str | None:
    if entry.up == entry.down:
        return "as many votes up as down"
    if not entry.question:
        return "question not stored (insights.store_questions: false)"
    if not any(c.doc_id and not c.web for c in entry.citations):
        return "no document of the knowledge base cited"
    return None


async def _documents(index: SearchIndex, doc_ids: set[str]) -> dict[str, tuple[str, str]]:
    """(title, full text) of each document still in the index, its chunks in order."""
    records = await index.documents()
    corpus = {}
    for doc_id in sorted(doc_ids & set(records)):
        record = records[doc_id]
        hits = await index.search(
            record.title or doc_id,
            k=max(1, record.chunk_count),
            filters=SearchFilters(doc_ids=(doc_id,)),
        )
        chunks = sorted((h.chunk for h in hits), key=lambda c: c.position)
        corpus[doc_id] = (record.title, "\n\n".join(c.text for c in chunks))
    return corpus


def _write(
    folder: Path,
    entries: Sequence[LoggedAnswer],
    corpus: dict[str, tuple[str, str]],
    references: bool,
) -> None:
    kept = [e for e in entries if any(c.doc_id in corpus for c in e.citations)]
    if not kept:
        return
    try:
        (folder / "qrels").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DatasetError(f"{folder}: {exc.strerror or exc}") from exc
    docs = sorted({c.doc_id for e in kept for c in e.citations if c.doc_id in corpus})
    _jsonl(
        folder / "corpus.jsonl",
        ({"_id": d, "title": corpus[d][0], "text": corpus[d][1]} for d in docs),
    )
    _jsonl(
        folder / "queries.jsonl",
        (
            {
                "_id": e.answer_id,
                "text": e.question,
                "metadata": {"up": e.up, "down": e.down, "reasons": list(e.reasons)},
            }
            for e in kept
        ),
    )
    rows = sorted(
        {(e.answer_id, c.doc_id) for e in kept for c in e.citations if c.doc_id in corpus}
    )
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in rows),
        encoding="utf-8",
    )
    if references:
        _jsonl(folder / "answers.jsonl", ({"_id": e.answer_id, "answer": e.text} for e in kept))


def _jsonl(path: Path, rows: Iterable[dict[str, object]]) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
