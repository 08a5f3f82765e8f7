"""Ranking ideas measured and not adopted, kept runnable: vector-side pseudo-relevance feedback,
a passage inheriting its document's evidence, and a learned fusion (BENCHMARKS.md, "Fusion and
the other cheap levers").

Each runs on the same three sets as the shipped fusion: SciFact test (300 claims), the Anthropic
docs QA set (100 questions) and SciFact **train** (809 claims, used only to train and
cross-validate the learned fusion). The shipped min-max fusion is recomputed alongside as the
reference. The indices are `bench.relevance_floor`'s (built once into `.bot/bench/floor/`).

    python -m bench.ranking_experiments
"""

from __future__ import annotations

import asyncio
import csv
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold

from bench.common import REPO, SHARED_EVAL, bench_settings, write_result
from bench.relevance_floor import CACHE, open_index
from bot.wiring import build_embedder
from core.domain.documents import SearchMode
from core.evaluation.retrieval import Dataset, load_dataset, mrr_at, ndcg_at
from core.search.fusion import Fused, Ranked, normalised, score_fusion
from core.search.hybrid import top_passages

ROOT = REPO / ".bot" / "bench" / "floor"
SHARE = 0.5  # the shipped vector share
FOLDS = 5
Matrix = npt.NDArray[np.float32]


@dataclass
class Query:
    """One question's two candidate lists, and what it takes to search again."""

    qid: str
    vector: Matrix
    bm25: list[Ranked]


@dataclass
class Corpus:
    ids: list[str]
    docs: dict[str, str]  # chunk id -> document id
    matrix: Matrix
    candidates: int
    top_k: int  # the passages the model is shown
    per_document: int  # of those, at most this many of one document while others remain

    def vector_side(self, query: Matrix) -> list[Ranked]:
        scores = self.matrix @ query
        best = np.argsort(-scores)[: self.candidates]
        return [Ranked(self.ids[i], float(scores[i])) for i in best]


def train_split(folder: Path) -> Dataset:
    """SciFact's train claims with their judgements (the evaluation loader reads test)."""
    data = load_dataset(folder)
    qrels: dict[str, dict[str, int]] = {}
    with (folder / "qrels" / "train.tsv").open(encoding="utf-8") as handle:
        for row in csv.reader(handle, delimiter="\t"):
            if len(row) >= 3 and row[0] != "query-id" and int(row[2]) > 0:
                qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    lines = (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    asked = {str(q["_id"]): str(q["text"]) for q in map(json.loads, lines)}
    return Dataset(data.name, data.corpus, {q: asked[q] for q in qrels}, qrels)


async def gather(name: str, data: Dataset) -> tuple[Corpus, list[Query]]:
    settings = bench_settings(ROOT / name, BOT_EMBEDDINGS__CACHE_PATH=str(CACHE))
    embedder = build_embedder(settings)
    # The BM25 side in its own order (its list position is its rank): the search's
    # per-document limit is applied by `figures`, after each ranking, not to one side.
    index = await open_index(name, ROOT, embedder, BOT_SEARCH__MAX_PASSAGES_PER_DOCUMENT="0")
    try:
        with sqlite3.connect(settings.index_path) as db:
            rows = db.execute("SELECT chunk_id, doc_id, embedding FROM chunks").fetchall()
        matrix = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32)
        corpus = Corpus(
            [r[0] for r in rows],
            {r[0]: r[1] for r in rows},
            matrix.reshape(len(rows), -1),
            settings.search.candidates,
            settings.search.top_k,
            settings.search.max_passages_per_document,
        )
        queries = []
        for qid, text in data.queries.items():
            hits = await index.search(text, k=corpus.candidates, mode=SearchMode.BM25)
            bm25 = [Ranked(h.chunk.chunk_id, h.bm25_score or 0.0) for h in hits]
            vector = np.asarray(await embedder.embed_query(text), dtype=np.float32)
            queries.append(Query(qid, vector, bm25))
    finally:
        await index.close()
    return corpus, queries


def shown_key(top_k: int) -> str:
    """The name `figures` gives what the model is shown (Shown@top_k)."""
    return f"relevant shown in top {top_k}"


def figures(
    ranked: list[list[str]],
    corpus: Corpus,
    data: Dataset,
    queries: list[Query],
    per_document: int | None = None,
) -> Any:
    """The benchmarks' per-document figures, and what the model is shown: the share of the
    relevant documents with a passage among the top `top_k` passages, and how many documents
    those passages come from. A ranking can gain the first and lose the second. Each ranking
    goes through the search's per-document limit first, as the product's would (the
    settings' `max_passages_per_document` unless `per_document` says otherwise); it moves no
    document's first passage, so only the last two figures depend on it."""
    limit = corpus.per_document if per_document is None else per_document
    ndcg = mrr = shown = spread = 0.0
    for ranking, query in zip(ranked, queries, strict=True):
        passages = [Fused(key) for key in ranking]
        chunks = [f.key for f in top_passages(passages, corpus.docs, len(passages), limit)]
        relevant = data.qrels[query.qid]
        documents = list(dict.fromkeys(corpus.docs[c] for c in chunks))
        ndcg += ndcg_at(documents, relevant, 10)
        mrr += mrr_at(documents, relevant, 10)
        top = {corpus.docs[c] for c in chunks[: corpus.top_k]}
        shown += len(top & relevant.keys()) / len(relevant)
        spread += len(top)
    n = len(queries)
    return {
        "ndcg@10": round(ndcg / n, 4),
        "mrr@10": round(mrr / n, 4),
        shown_key(corpus.top_k): round(shown / n, 4),
        f"documents in top {corpus.top_k}": round(spread / n, 2),
    }


def fused(bm25: list[Ranked], vector: list[Ranked]) -> list[str]:
    return [f.key for f in score_fusion(bm25, vector, vector_share=SHARE, normalisation="minmax")]


def feedback(corpus: Corpus, query: Query, passages: int, weight: float, *, own: bool) -> list[str]:
    """The query vector moved towards the mean of the top passages (of the vector side itself,
    or of the fused list), then searched again."""
    first = corpus.vector_side(query.vector)
    top = [r.key for r in first] if own else fused(query.bm25, first)
    position = {c: i for i, c in enumerate(corpus.ids)}
    moved = query.vector + weight * corpus.matrix[[position[c] for c in top[:passages]]].mean(0)
    return fused(query.bm25, corpus.vector_side(moved / np.linalg.norm(moved)))


def inherited(corpus: Corpus, query: Query, gamma: float) -> list[str]:
    """Each side's score raised to `gamma` times the best of its document's passages."""
    scored = []
    sides = [
        normalised(query.bm25, "minmax"),
        normalised(corpus.vector_side(query.vector), "minmax"),
    ]
    keys = list(dict.fromkeys([*sides[0][0], *sides[1][0]]))
    best: list[dict[str, float]] = [{}, {}]
    for (scores, low), doc_best in zip(sides, best, strict=True):
        for key in keys:
            doc = corpus.docs[key]
            doc_best[doc] = max(doc_best.get(doc, low), scores.get(key, low))
    for key in keys:
        doc = corpus.docs[key]
        parts = [
            max(scores.get(key, low), gamma * doc_best[doc])
            for (scores, low), doc_best in zip(sides, best, strict=True)
        ]
        scored.append(((1 - SHARE) * parts[0] + SHARE * parts[1], key))
    return [key for _, key in sorted(scored, key=lambda s: -s[0])]


def features(corpus: Corpus, query: Query) -> tuple[list[str], Matrix]:
    """Per candidate: both sides' min-max scores, presence, reciprocal ranks, the raw cosine,
    the document's best of each side, and two interactions."""
    vector = corpus.vector_side(query.vector)
    (bm, bm_low), (vec, vec_low) = normalised(query.bm25, "minmax"), normalised(vector, "minmax")
    bm_rank = {r.key: n for n, r in enumerate(query.bm25, 1)}
    vec_rank = {r.key: n for n, r in enumerate(vector, 1)}
    cosine = {r.key: r.score for r in vector}
    keys = list(dict.fromkeys([*bm, *vec]))
    doc_bm: dict[str, float] = {}
    doc_vec: dict[str, float] = {}
    for key in keys:
        doc = corpus.docs[key]
        doc_bm[doc] = max(doc_bm.get(doc, bm_low), bm.get(key, bm_low))
        doc_vec[doc] = max(doc_vec.get(doc, vec_low), vec.get(key, vec_low))
    top_cosine = vector[0].score if vector else 0.0
    absent = corpus.candidates + 50
    rows = []
    for key in keys:
        doc = corpus.docs[key]
        b, v = bm.get(key, bm_low), vec.get(key, vec_low)
        rows.append(
            [
                b,
                v,
                1 / (5 + bm_rank.get(key, absent)),
                1 / (5 + vec_rank.get(key, absent)),
                float(key in bm),
                float(key in vec),
                doc_bm[doc],
                doc_vec[doc],
                cosine.get(key, min(cosine.values(), default=0.0)),
                v * top_cosine,
                b * v,
            ]
        )
    return keys, np.asarray(rows, dtype=np.float32)


Scorer = Callable[[Matrix], npt.NDArray[np.float64]]


def learned(table: list[tuple[list[str], Matrix, list[int]]], c: float) -> Scorer:
    """A pointwise logistic regression: is this passage's document relevant?"""
    model = LogisticRegression(C=c, max_iter=3000, class_weight="balanced")
    model.fit(np.vstack([x for _, x, _ in table]), np.concatenate([y for _, _, y in table]))
    return lambda x: np.asarray(model.decision_function(x), dtype=np.float64)


def labelled(corpus: Corpus, queries: list[Query], data: Dataset) -> list[Any]:
    table = []
    for query in queries:
        keys, x = features(corpus, query)
        relevant = data.qrels[query.qid]
        table.append((keys, x, [int(corpus.docs[k] in relevant) for k in keys]))
    return table


def ranked_by(scorer: Scorer, table: list[Any]) -> list[list[str]]:
    return [[keys[i] for i in np.argsort(-scorer(x), kind="stable")] for keys, x, _ in table]


async def main() -> None:
    sets = {
        "scifact test": ("scifact", load_dataset(SHARED_EVAL / "scifact")),
        "docs QA": ("anthropic_docs_qa", load_dataset(SHARED_EVAL / "anthropic_docs_qa")),
        "scifact train": ("scifact", train_split(SHARED_EVAL / "scifact")),
    }
    gathered = {label: await gather(name, data) for label, (name, data) in sets.items()}
    result: dict[str, Any] = {}

    def measure(label: str, rank: Callable[[Corpus, Query], list[str]]) -> Any:
        corpus, queries = gathered[label]
        return figures([rank(corpus, q) for q in queries], corpus, sets[label][1], queries)

    for label in sets:
        result.setdefault("min-max fusion (shipped)", {})[label] = measure(
            label, lambda c, q: fused(q.bm25, c.vector_side(q.vector))
        )
        corpus, queries = gathered[label]
        shipped = [fused(q.bm25, corpus.vector_side(q.vector)) for q in queries]
        for limit in (0, 1, 2, 4):
            name = f"min-max fusion, at most {limit or 'any number of'} passages per document"
            result.setdefault(name, {})[label] = figures(
                shipped, corpus, sets[label][1], queries, per_document=limit
            )
        for own in (True, False):
            for passages in (3, 5):
                for weight in (0.3, 0.6, 1.0):
                    name = f"feedback from {'vector' if own else 'fused'} top {passages}, {weight}"
                    result.setdefault(name, {})[label] = measure(
                        label,
                        lambda c, q, p=passages, w=weight, o=own: feedback(c, q, p, w, own=o),
                    )
        for gamma in (0.8, 1.0):
            result.setdefault(f"document evidence, gamma {gamma}", {})[label] = measure(
                label, lambda c, q, g=gamma: inherited(c, q, g)
            )
        print(f"{label}: done", flush=True)

    train_corpus, train_queries = gathered["scifact train"]
    train = labelled(train_corpus, train_queries, sets["scifact train"][1])
    folds = KFold(FOLDS, shuffle=True, random_state=0)
    cross_validated = {}
    for c in (0.1, 1.0, 10.0):
        scores = []
        for fit, held in folds.split(train):
            scorer = learned([train[i] for i in fit], c)
            held_queries = [train_queries[i] for i in held]
            ranked = ranked_by(scorer, [train[i] for i in held])
            scores.append(
                figures(ranked, train_corpus, sets["scifact train"][1], held_queries)["ndcg@10"]
            )
        cross_validated[c] = round(float(np.mean(scores)), 4)
    chosen = max(cross_validated, key=lambda c: cross_validated[c])
    scorer = learned(train, chosen)
    result["learned fusion"] = {"cross-validated on train, by C": cross_validated, "C": chosen}
    for label in ("scifact test", "docs QA"):
        corpus, queries = gathered[label]
        table = labelled(corpus, queries, sets[label][1])
        result["learned fusion"][label] = figures(
            ranked_by(scorer, table), corpus, sets[label][1], queries
        )
    for name, row in result.items():
        print(f"{name}: {row}")
    print(f"-> {write_result('ranking-experiments.json', result)}")


if __name__ == "__main__":
    asyncio.run(main())
