"""Retrieval quality on BEIR-layout datasets: the numbers that say whether search got better.

The corpus goes through the product's own pipeline (chunking, embedding text, index, fusion), so
the benchmark measures what users get. A document's rank is the rank of its best chunk.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from core.config import IngestSettings
from core.domain.documents import DocumentRecord, SearchHit, SearchMode
from core.errors import DatasetError
from core.ingest.pipeline import PreparedDocument, build_chunks
from core.ingest.sections import ParsedDocument, Section
from core.ports import SearchIndex

_QRELS_COLUMNS = 3  # query-id, corpus-id, score


@dataclass(slots=True)
class Dataset:
    name: str
    corpus: dict[str, tuple[str, str]]  # id -> (title, text)
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def jsonl_objects(path: Path) -> Iterator[tuple[str, dict[str, object]]]:
    """Each object of a JSON-lines file, with `path:line` to name it in an error."""
    try:
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                where = f"{path}:{number}"
                try:
                    value = json.loads(line)
                except (json.JSONDecodeError, RecursionError) as exc:
                    raise DatasetError(f"{where}: not JSON: {exc}") from None
                if not isinstance(value, dict) or "_id" not in value:
                    raise DatasetError(f'{where}: not an object with an "_id"')
                yield where, value
    except OSError as exc:
        raise DatasetError(f"can't read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise DatasetError(f"{path} is not UTF-8 text") from None


def _qrels(path: Path) -> dict[str, dict[str, int]]:
    """The judgements of a tab-separated qrels file (query-id, corpus-id, score), positive
    scores only."""
    qrels: dict[str, dict[str, int]] = {}
    try:
        with path.open(encoding="utf-8") as handle:
            for number, row in enumerate(csv.reader(handle, delimiter="\t"), start=1):
                if not row or row[0] == "query-id":
                    continue
                if len(row) < _QRELS_COLUMNS:
                    raise DatasetError(
                        f"{path}:{number}: not query-id, corpus-id and score separated by tabs"
                    )
                try:
                    score = int(row[2])
                except ValueError:
                    raise DatasetError(
                        f"{path}:{number}: the score is not a whole number"
                    ) from None
                if score > 0:
                    qrels.setdefault(row[0], {})[row[1]] = score
    except OSError as exc:
        raise DatasetError(f"can't read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise DatasetError(f"{path} is not UTF-8 text") from None
    return qrels


def load_dataset(folder: Path, limit: int | None = None) -> Dataset:
    if not folder.is_dir():
        raise DatasetError(f"{folder}: no such folder (a BEIR dataset is a folder)")
    qrels_path = next(
        (p for p in (folder / "qrels.tsv", folder / "qrels" / "test.tsv") if p.exists()), None
    )
    if qrels_path is None:
        raise DatasetError(f"{folder}: no qrels.tsv or qrels/test.tsv")
    qrels = _qrels(qrels_path)
    if not qrels:
        raise DatasetError(f"{qrels_path}: no judgement with a positive score")
    queries = {
        str(q["_id"]): str(q.get("text") or "")
        for _, q in jsonl_objects(folder / "queries.jsonl")
        if str(q["_id"]) in qrels
    }
    if limit is not None:
        queries = dict(list(queries.items())[:limit])
    corpus = {
        str(d["_id"]): (str(d.get("title") or ""), str(d.get("text") or ""))
        for _, d in jsonl_objects(folder / "corpus.jsonl")
    }
    if not queries:
        raise DatasetError(
            f"{folder}: no query in queries.jsonl has a judgement in {qrels_path.name}"
        )
    if not corpus:
        raise DatasetError(f"{folder}: corpus.jsonl holds no document")
    return Dataset(folder.name, corpus, queries, {q: qrels[q] for q in queries})


def beir_url(doc_id: str) -> str:
    """The link a BEIR document gets: its id when that is a URL (as in the docs QA set)."""
    return doc_id if doc_id.startswith(("http://", "https://")) else f"beir:{doc_id}"


def prepared_corpus(
    dataset: Dataset, settings: IngestSettings, source: str
) -> Iterator[PreparedDocument]:
    for doc_id, (title, text) in dataset.corpus.items():
        url = beir_url(doc_id)
        parsed = ParsedDocument(title=title, sections=[Section("", None, text)])
        chunks = build_chunks(parsed, doc_id=doc_id, source=source, url=url, settings=settings)
        checksum = hashlib.sha256(f"{title}\n{text}".encode()).hexdigest()
        record = DocumentRecord(doc_id, source, title, url, checksum, len(chunks))
        yield PreparedDocument(record, chunks, doc_id)


def ndcg_at(ranked: list[str], relevant: dict[str, int], k: int) -> float:
    dcg = sum((2 ** relevant.get(d, 0) - 1) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: list[str], relevant: dict[str, int], k: int) -> float:
    return len(set(ranked[:k]) & relevant.keys()) / len(relevant) if relevant else 0.0


def mrr_at(ranked: list[str], relevant: dict[str, int], k: int) -> float:
    return next((1.0 / (i + 1) for i, d in enumerate(ranked[:k]) if d in relevant), 0.0)


@dataclass(slots=True)
class ModeResult:
    mode: SearchMode
    metrics: dict[str, float] = field(default_factory=dict)
    latency_ms_p50: float = 0.0
    latency_ms_p95: float = 0.0


SHALLOW, DEEP = 10, 100  # the cut-offs of the figures
CHUNKS_PER_DOCUMENT = 3


def _documents(hits: list[SearchHit], depth: int) -> list[str]:
    return list(dict.fromkeys(h.chunk.doc_id for h in hits))[:depth]


async def evaluate(
    index: SearchIndex,
    dataset: Dataset,
    modes: list[SearchMode],
    *,
    shown: int,
    deep: bool = True,
) -> list[ModeResult]:
    """Per-document figures, and `shown@k`: the share of the relevant documents with a passage
    among the first `shown` passages, the ones a question's answer is written from (per-document
    figures count a document once, however many of its passages fill that list).

    `deep=False` leaves out recall@100, whose search (ten times deeper) doubles the work: for a
    caller that reads only the top-10 figures on a slow index."""
    results: list[ModeResult] = []
    for mode in modes:
        sums = {
            "ndcg@10": 0.0,
            "recall@10": 0.0,
            "mrr@10": 0.0,
            f"shown@{shown}": 0.0,
        }
        if deep:
            sums["recall@100"] = 0.0
        latencies: list[float] = []
        for query_id, text in dataset.queries.items():
            relevant = dataset.qrels[query_id]
            # The top-10 figures come from a search as deep as the bot's own (each side's
            # `candidates`, as for any k up to it): a deeper one would rank differently than the
            # bot does (score fusion normalises over each side's list). Recall@100 needs a deeper
            # search. Several chunks may share a document: ask for more chunks than documents.
            started = time.perf_counter()
            hits = await index.search(text, k=max(SHALLOW * CHUNKS_PER_DOCUMENT, shown), mode=mode)
            latencies.append((time.perf_counter() - started) * 1000)
            ranked = _documents(hits, SHALLOW)
            sums["ndcg@10"] += ndcg_at(ranked, relevant, 10)
            sums["recall@10"] += recall_at(ranked, relevant, 10)
            sums["mrr@10"] += mrr_at(ranked, relevant, 10)
            sums[f"shown@{shown}"] += recall_at(_documents(hits[:shown], shown), relevant, shown)
            if deep:
                hits = await index.search(text, k=DEEP * CHUNKS_PER_DOCUMENT, mode=mode)
                sums["recall@100"] += recall_at(_documents(hits, DEEP), relevant, 100)
        n = len(dataset.queries)
        cuts = statistics.quantiles(latencies, n=20) if len(latencies) > 1 else latencies * 19
        results.append(
            ModeResult(
                mode,
                {k: round(v / n, 4) for k, v in sums.items()},
                latency_ms_p50=round(statistics.median(latencies), 2),
                latency_ms_p95=round(cuts[18], 2),
            )
        )
    return results
