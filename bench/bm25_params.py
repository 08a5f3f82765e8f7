"""BM25's k1 and b, swept: would other values than FTS5's fixed k1 1.2, b 0.75 rank better?
(BENCHMARKS.md, "Fusion and the other cheap levers".)

FTS5 offers no setting for k1 and b, so the lexical side is scored here in numpy with FTS5's
own formula (fts5_aux.c) over FTS5's own postings: the terms, stems and positions of each
passage are read from an `fts5vocab` view of the index, and each query term is stemmed by the
same tokenizer in a temporary FTS5 table. Column weights and the postings budget are the
settings'. At k1 1.2, b 0.75 it first checks itself against the index's real `bm25()` (the
same top 10 for every query), so the sweep measures k1 and b and nothing else.

The choice is made on SciFact **train** (809 claims); SciFact test and the docs set only
report it, with a paired bootstrap interval of the test gain. The indices are
`bench.relevance_floor`'s (built once into `.bot/bench/floor/`); about a minute.

    python -m bench.bm25_params
"""

from __future__ import annotations

import asyncio
import math
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.common import SHARED_EVAL, bench_settings, write_result
from bench.ranking_experiments import (
    ROOT,
    Corpus,
    Query,
    figures,
    fused,
    shown_key,
    train_split,
)
from bench.relevance_floor import CACHE
from bot.wiring import build_embedder
from core.backends.sqlite.fts_query import fts_or_expression, within_postings_budget
from core.backends.sqlite.schema import TOKENIZER
from core.evaluation.retrieval import Dataset, load_dataset, ndcg_at
from core.search.fusion import Fused, Ranked
from core.search.hybrid import top_passages
from core.search.terms import query_terms

SETTINGS = bench_settings(ROOT / "scifact", BOT_EMBEDDINGS__CACHE_PATH=str(CACHE))
SEARCH = SETTINGS.search
WEIGHTS = SEARCH.bm25_columns.model_dump()  # column name -> weight
SHIPPED = (1.2, 0.75)  # FTS5's constants
K1S = (0.3, 0.6, 0.9, 1.2, 1.5, 2.0, 3.0)
BS = (0.1, 0.3, 0.5, 0.75, 0.9, 1.0)
RESAMPLES = 1000

Postings = tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]
NONE: Postings = (np.zeros(0, np.int64), np.zeros(0, np.float64))


class Lexical:
    """One index's FTS5 postings (column-weighted term frequencies), scored for any k1, b."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        self.db.execute(
            "CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, 'chunks_fts', 'instance')"
        )
        self.chunk_of = dict(self.db.execute("SELECT id, chunk_id FROM chunks").fetchall())
        self.row_of = {chunk: row for row, chunk in self.chunk_of.items()}
        self.passages = self.db.execute("SELECT count(*) FROM chunks_fts").fetchone()[0]
        self.size = max(self.chunk_of) + 1
        self.length = np.zeros(self.size)
        weighted: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
        self.at: dict[str, dict[tuple[int, str], set[int]]] = defaultdict(lambda: defaultdict(set))
        for term, row, column, offset in self.db.execute(
            "SELECT term, doc, col, offset FROM temp.vocab"
        ):
            self.length[row] += 1
            weighted[term][row] += WEIGHTS[column]
            self.at[term][(row, column)].add(offset)
        self.average = self.length.sum() / self.passages
        self.postings = {
            term: (np.fromiter(rows, np.int64), np.fromiter(rows.values(), np.float64))
            for term, rows in weighted.items()
        }
        self.tokens: dict[str, list[str]] = {}

    def tokenise(self, terms: list[str]) -> None:
        """Each query term's FTS5 tokens (one stem, or a phrase), by FTS5's own tokenizer."""
        new = [t for t in dict.fromkeys(terms) if t not in self.tokens]
        if not new:
            return
        self.db.execute("DROP TABLE IF EXISTS temp.asked_vocab")
        self.db.execute("DROP TABLE IF EXISTS temp.asked")
        self.db.execute(f"CREATE VIRTUAL TABLE temp.asked USING fts5(t, tokenize = '{TOKENIZER}')")
        self.db.executemany("INSERT INTO temp.asked (rowid, t) VALUES (?, ?)", enumerate(new, 1))
        self.db.execute(
            "CREATE VIRTUAL TABLE temp.asked_vocab USING fts5vocab(temp, 'asked', 'instance')"
        )
        found: dict[int, list[tuple[int, str]]] = defaultdict(list)
        for token, row, offset in self.db.execute("SELECT term, doc, offset FROM temp.asked_vocab"):
            found[row].append((offset, token))
        for row, term in enumerate(new, 1):
            self.tokens[term] = [token for _, token in sorted(found[row])]

    def term_postings(self, term: str) -> Postings:
        tokens = self.tokens[term]
        if len(tokens) <= 1:
            return self.postings.get(tokens[0], NONE) if tokens else NONE
        # A phrase (FTS5 quotes each term): its tokens at consecutive offsets in one column.
        hits: dict[int, float] = defaultdict(float)
        for (row, column), offsets in self.at.get(tokens[0], {}).items():
            count = sum(
                all(
                    o + j in self.at.get(t, {}).get((row, column), ()) for j, t in enumerate(tokens)
                )
                for o in offsets
            )
            hits[row] += WEIGHTS[column] * count
        found = {row: f for row, f in hits.items() if f}
        return np.fromiter(found, np.int64), np.fromiter(found.values(), np.float64)

    def kept_terms(self, text: str) -> list[str]:
        """The query's terms the search would score: those within the postings budget, in the
        query's order (each tokenised, so `self.tokens` holds their FTS5 tokens)."""
        terms = query_terms(text[: SEARCH.max_query_chars])
        self.tokenise(terms)
        if SEARCH.bm25_max_postings:
            frequency = {t: len(self.term_postings(t)[0]) for t in terms}
            terms = within_postings_budget(terms, frequency, SEARCH.bm25_max_postings)
        return terms

    def query(self, text: str) -> list[Postings]:
        """The postings the search would score: the query's terms within the postings budget."""
        return [self.term_postings(t) for t in self.kept_terms(text)]

    def scores(
        self,
        postings: list[Postings],
        k1: float,
        b: float,
        weights: Sequence[float] | None = None,
    ) -> npt.NDArray[np.float64]:
        """FTS5's bm25() of every passage with these k1 and b (its idf floor of 1e-6 included);
        `weights`, one per postings list, weigh each term's share (1 each, as FTS5 does, when
        not given)."""
        score = np.zeros(self.size)
        for (rows, f), weight in zip(postings, weights or [1.0] * len(postings), strict=True):
            if len(rows):
                n = len(rows)
                idf = max(math.log((self.passages - n + 0.5) / (n + 0.5)), 1e-6)
                norm = k1 * (1 - b + b * self.length[rows] / self.average)
                score[rows] += weight * idf * f * (k1 + 1) / (f + norm)
        return score

    def rank(
        self,
        postings: list[Postings],
        k1: float,
        b: float,
        weights: Sequence[float] | None = None,
    ) -> list[Ranked]:
        """The first `candidates` passages by `scores`, ties by row as FTS5 breaks them."""
        return self.ranked(self.scores(postings, k1, b, weights))

    def ranked(self, score: npt.NDArray[np.float64]) -> list[Ranked]:
        hit = np.nonzero(score)[0]
        order = hit[np.lexsort((hit, -score[hit]))][: SEARCH.candidates]
        return [Ranked(self.chunk_of[int(i)], float(score[i])) for i in order]

    def fts5(self, text: str) -> list[str]:
        """The index's own BM25 side, as the search asks it."""
        terms = query_terms(text[: SEARCH.max_query_chars])
        if SEARCH.bm25_max_postings:
            frequency = {
                t: self.db.execute(
                    "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (f'"{t}"',)
                ).fetchone()[0]
                for t in terms
            }
            terms = within_postings_budget(terms, frequency, SEARCH.bm25_max_postings)
        if not terms:
            return []
        rows = self.db.execute(
            "SELECT rowid, bm25(chunks_fts, ?, ?, ?, ?) AS s FROM chunks_fts"
            " WHERE chunks_fts MATCH ? ORDER BY s LIMIT ?",
            (*WEIGHTS.values(), fts_or_expression(terms), SEARCH.candidates),
        ).fetchall()
        return [self.chunk_of[row] for row, _ in rows]


def corpus_of(path: Path) -> Corpus:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT chunk_id, doc_id, embedding FROM chunks").fetchall()
    matrix = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32)
    return Corpus(
        [r[0] for r in rows],
        {r[0]: r[1] for r in rows},
        matrix.reshape(len(rows), -1),
        SEARCH.candidates,
        SEARCH.top_k,
        SEARCH.max_passages_per_document,
    )


def per_query_ndcg(
    ranked: list[list[str]], corpus: Corpus, data: Dataset, queries: list[Query]
) -> npt.NDArray[np.float64]:
    """nDCG@10 per query, as `figures` computes its mean (for the bootstrap)."""
    scores = []
    for ranking, query in zip(ranked, queries, strict=True):
        passages = top_passages(
            [Fused(k) for k in ranking], corpus.docs, len(ranking), corpus.per_document
        )
        documents = list(dict.fromkeys(corpus.docs[p.key] for p in passages))
        scores.append(ndcg_at(documents, data.qrels[query.qid], 10))
    return np.asarray(scores)


@dataclass
class Run:
    """One set's queries, ready to rank again: their BM25 postings and their vector sides."""

    lexical: Lexical
    data: Dataset
    corpus: Corpus
    queries: list[Query]
    postings: list[list[Postings]]
    vector_sides: list[list[Ranked]]


async def prepared() -> dict[str, Run]:
    """SciFact train (which chooses), SciFact test and the docs set, on the floor's indices."""
    scifact, docs = SHARED_EVAL / "scifact", SHARED_EVAL / "anthropic_docs_qa"
    sets = {
        "scifact train": ("scifact", train_split(scifact)),
        "scifact test": ("scifact", load_dataset(scifact)),
        "docs QA": ("anthropic_docs_qa", load_dataset(docs)),
    }
    lexical = {name: Lexical(ROOT / name / "index.sqlite") for name in ("scifact", docs.name)}
    corpora = {name: corpus_of(ROOT / name / "index.sqlite") for name in lexical}
    embedder = build_embedder(SETTINGS)
    runs = {}
    for label, (name, data) in sets.items():
        run = Run(lexical[name], data, corpora[name], [], [], [])
        for qid, text in data.queries.items():
            vector = np.asarray(await embedder.embed_query(text), dtype=np.float32)
            run.queries.append(Query(qid, vector, []))
            run.postings.append(run.lexical.query(text))
            run.vector_sides.append(run.corpus.vector_side(vector))
        runs[label] = run
    return runs


def paired_gain(new: npt.NDArray[np.float64], old: npt.NDArray[np.float64]) -> dict[str, Any]:
    """The mean per-query gain, with a paired bootstrap interval."""
    gain = new - old
    rng = np.random.default_rng(0)
    means = [gain[rng.integers(0, len(gain), len(gain))].mean() for _ in range(RESAMPLES)]
    return {
        "mean": round(float(gain.mean()), 4),
        "95% interval": [round(float(np.percentile(means, q)), 4) for q in (2.5, 97.5)],
        "queries better / worse": [int((gain > 0).sum()), int((gain < 0).sum())],
    }


async def main() -> None:
    runs = await prepared()
    result: dict[str, Any] = {"check at k1 1.2, b 0.75": {}, "grid": {}}
    for label, run in runs.items():
        own = [[r.key for r in run.lexical.rank(p, *SHIPPED)] for p in run.postings]
        real = [run.lexical.fts5(text) for text in run.data.queries.values()]
        same = np.mean([a[:10] == b[:10] for a, b in zip(own, real, strict=True)])
        result["check at k1 1.2, b 0.75"][label] = {"same top 10 as FTS5": float(same)}
        print(
            f"{label}: {len(run.queries)} queries, same top 10 as FTS5 for {same:.1%}", flush=True
        )
    per_query: dict[tuple[float, float], npt.NDArray[np.float64]] = {}
    for k1 in K1S:
        for b in BS:
            row = {}
            for label, run in runs.items():
                lists = [run.lexical.rank(p, k1, b) for p in run.postings]
                row[label] = hybrid_figures(run, lists)
                if label == "scifact test":
                    per_query[(k1, b)] = hybrid_per_query(run, lists)
            result["grid"][f"k1={k1}, b={b}"] = row
            print(f"k1={k1}, b={b}:", row, flush=True)
    chosen = max(
        per_query,
        key=lambda kb: result["grid"][f"k1={kb[0]}, b={kb[1]}"]["scifact train"]["hybrid nDCG@10"],
    )
    result["chosen on train"] = f"k1={chosen[0]}, b={chosen[1]}"
    result["scifact test gain over the shipped"] = paired_gain(
        per_query[chosen], per_query[SHIPPED]
    )
    print(
        "chosen on train:", result["chosen on train"], result["scifact test gain over the shipped"]
    )
    print(write_result("bm25-params.json", result))


Lists = list[list[Ranked]]  # one BM25 ranking per query of a set


Setting = tuple[str, Callable[[str, Run], Lists]] | tuple[str, Callable[[str, Run], Lists], int]


def sweep(
    runs: dict[str, Run],
    settings: Iterable[Setting],
    file: str,
    *,
    reference: str = "shipped",
    keep_shown: bool = False,
) -> None:
    """Each named setting's BM25 rankings on every set, fused as shipped (a third element: the
    per-document limit to show them through, else the settings'); the one SciFact train
    scores best is chosen, with a paired bootstrap interval of its SciFact test gain over the
    `reference` setting. `keep_shown`: also the best on train among the settings that show
    the model no fewer relevant documents than the reference on any set. Printed as it goes,
    and written to `file`."""
    result: dict[str, Any] = {"grid": {}}
    per_query: dict[str, npt.NDArray[np.float64]] = {}
    for name, rankings, *limit in settings:
        row = {}
        for label, given in runs.items():
            lists = rankings(label, given)
            run = given
            if limit:
                run = replace(given, corpus=replace(given.corpus, per_document=limit[0]))
            row[label] = hybrid_figures(run, lists)
            if label == "scifact test":
                per_query[name] = hybrid_per_query(run, lists)
        result["grid"][name] = row
        print(f"{name}:", row, flush=True)
    grid = result["grid"]

    def chosen(names: Iterable[str]) -> str:
        return max(names, key=lambda n: grid[n]["scifact train"]["hybrid nDCG@10"])

    choices = {"chosen on train": chosen(grid)}
    if keep_shown:
        shown = f"hybrid {shown_key(SEARCH.top_k)}"
        keeping = [
            n for n in grid if all(grid[n][s][shown] >= grid[reference][s][shown] for s in runs)
        ]
        choices["chosen on train, showing no fewer relevant documents"] = chosen(keeping)
    for why, name in choices.items():
        result[why] = name
        result[f"scifact test gain over {reference}, {why}"] = paired_gain(
            per_query[name], per_query[reference]
        )
        print(f"{why}:", name, result[f"scifact test gain over {reference}, {why}"])
    print(write_result(file, result))


def hybrid_per_query(run: Run, lists: list[list[Ranked]]) -> npt.NDArray[np.float64]:
    """The hybrid's nDCG@10 per query (for `paired_gain`)."""
    hybrid = [fused(a, v) for a, v in zip(lists, run.vector_sides, strict=True)]
    return per_query_ndcg(hybrid, run.corpus, run.data, run.queries)


def hybrid_figures(run: Run, lists: list[list[Ranked]]) -> dict[str, float]:
    """One BM25 ranking per query: its own nDCG@10, and the hybrid's once fused as shipped."""
    hybrid = [fused(a, v) for a, v in zip(lists, run.vector_sides, strict=True)]
    alone = figures([[r.key for r in a] for a in lists], run.corpus, run.data, run.queries)
    mixed = figures(hybrid, run.corpus, run.data, run.queries)
    shown = shown_key(run.corpus.top_k)
    return {
        "bm25 nDCG@10": alone["ndcg@10"],
        "hybrid nDCG@10": mixed["ndcg@10"],
        "hybrid MRR@10": mixed["mrr@10"],
        f"hybrid {shown}": mixed[shown],
    }


if __name__ == "__main__":
    asyncio.run(main())
