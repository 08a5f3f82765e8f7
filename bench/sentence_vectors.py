"""Sentence vectors with max-sim ("a poor man's multi-vector"), measured as a ranking lever.

A passage's single vector averages its ~1,000 characters into one point; a question that one
sentence answers may sit far from that average. Here every passage is also cut into sentences
(the answer checker's splitter, `core.answer.grounding.sentences`; a piece under 40 characters
joins its neighbour), each sentence is embedded with the passage's title and heading before it,
exactly as the passage itself is (`embedding_text`), and a passage scores the best cosine of its
sentences (or the mean of its best two). That score is tried

- (a) in place of the passage vector in the shipped min-max fusion (vector share 0.5);
- (b) as a third side beside BM25 and the passage vector (a small grid of shares);
- (c) as max(passage cosine, sentence score), the vector side's score.

The sets are `bench.ranking_experiments`' (SciFact test, the docs QA set, and SciFact **train**,
which chooses: a setting counts only if it also gains there), over `bench.relevance_floor`'s
indices, with the shipped fusion recomputed alongside. Each fused variant is also compared
with the shipped fusion question by question (how many gain, how many lose, a paired bootstrap
interval of the mean gain). Sentence vectors go to their own cache
(`.bot/bench/sentence-cache.sqlite`, so the product's cache is not bloated); the first run embeds
50,043 distinct SciFact sentences in 692 s and the docs set's 4,760 in 41 s on 2 cores (4.8 and
7.8 sentence vectors per passage); a killed run resumes from the cache, a cached run takes a
minute.

What it found (first run): no variant gains clearly. Two three-sided settings gain on all three
sets, on SciFact train by 0.0005 and 0.0014 (51 claims better, 40 worse), every bootstrap
interval spanning zero; replacing the passage vector (a) or taking the larger score (c) loses
or ties on train.

    python -m bench.sentence_vectors
"""

from __future__ import annotations

import asyncio
import math
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.common import REPO, SHARED_EVAL, bench_settings, write_result
from bench.ranking_experiments import (
    ROOT,
    SHARE,
    Corpus,
    Matrix,
    Query,
    figures,
    fused,
    gather,
    train_split,
)
from bot.wiring import build_embedder
from core.answer.grounding import sentences
from core.domain.documents import Chunk, embedding_text
from core.evaluation.retrieval import Dataset, load_dataset, ndcg_at
from core.search.fusion import Ranked, normalised

SENTENCE_CACHE = REPO / ".bot" / "bench" / "sentence-cache.sqlite"
SHORT = 40  # a piece shorter than this (a heading line, "1.", a fragment) joins its neighbour
BATCH = 2000  # sentences per cached call: what a killed run loses at most
BOOTSTRAP = 10_000
TOPS = (1, 2)  # a passage's score: its best sentence, or the mean of its best two
# (a) and (c) at the shipped share; (b) as shares of BM25, passage vector, sentence vector.
THREE_SIDES = (
    (0.5, 0.25, 0.25),
    (0.5, 0.35, 0.15),
    (0.5, 0.15, 0.35),
    (0.4, 0.3, 0.3),
    (0.6, 0.2, 0.2),
)


def split(text: str) -> list[str]:
    """`text` as sentences, a piece under `SHORT` characters joined to the next (the last one to
    the one before)."""
    pieces: list[str] = []
    for sentence, _ in sentences(text):
        if pieces and len(pieces[-1]) < SHORT:
            pieces[-1] += " " + sentence
        else:
            pieces.append(sentence)
    if len(pieces) > 1 and len(pieces[-1]) < SHORT:
        last = pieces.pop()
        pieces[-1] += " " + last
    return pieces or [text]


@dataclass
class Sentences:
    """Every passage's sentence vectors, as one matrix with each row's passage and slot."""

    matrix: Matrix
    owner: np.ndarray  # the passage (row of Corpus.matrix) of each sentence
    slot: np.ndarray  # the sentence's position within its passage
    passages: int
    widest: int  # the most sentences in one passage

    def scores(self, query: Matrix, top: int) -> np.ndarray:
        """Each passage's mean cosine over its `top` best sentences (fewer if it has fewer)."""
        cosines = self.matrix @ query
        if top == 1:
            best = np.full(self.passages, -np.inf, dtype=np.float32)
            np.maximum.at(best, self.owner, cosines)
            return best
        grid = np.full((self.passages, self.widest), -np.inf, dtype=np.float32)
        grid[self.owner, self.slot] = cosines
        kept = -np.partition(-grid, top - 1, axis=1)[:, :top]
        present = np.isfinite(kept)
        return np.asarray(np.where(present, kept, 0.0).sum(1) / present.sum(1), dtype=np.float32)


async def embed_sentences(name: str, corpus: Corpus) -> tuple[Sentences, dict[str, Any]]:
    """The corpus's passages cut into sentences and embedded (through the sentence cache)."""
    settings = bench_settings(ROOT / name, BOT_EMBEDDINGS__CACHE_PATH=str(SENTENCE_CACHE))
    position = {c: i for i, c in enumerate(corpus.ids)}
    with sqlite3.connect(settings.index_path) as db:
        rows = db.execute("SELECT chunk_id, title, heading, text FROM chunks").fetchall()
    texts: list[str] = []
    owner: list[int] = []
    slot: list[int] = []
    for chunk_id, title, heading, text in rows:
        for n, sentence in enumerate(split(text)):
            chunk = Chunk(chunk_id, "", "", title, heading, "", sentence, n)
            texts.append(embedding_text(chunk))
            owner.append(position[chunk_id])
            slot.append(n)
    unique = list(dict.fromkeys(texts))
    embedder = build_embedder(settings)
    vectors: dict[str, Matrix] = {}
    started = time.perf_counter()
    for start in range(0, len(unique), BATCH):
        batch = unique[start : start + BATCH]
        vectors.update(zip(batch, await embedder.embed_documents(batch), strict=True))
        done, elapsed = start + len(batch), time.perf_counter() - started
        print(
            f"{name}: {done}/{len(unique)} sentences, {elapsed:.0f} s "
            f"({embedder.computed} embedded now, {embedder.reused} from the cache)",
            flush=True,
        )
    found = Sentences(
        np.vstack([vectors[t] for t in texts]),
        np.asarray(owner),
        np.asarray(slot),
        len(corpus.ids),
        max(slot) + 1,
    )
    facts = {
        "passages": len(corpus.ids),
        "sentences": len(texts),
        "distinct sentences": len(unique),
        "storage multiple (sentence vectors / passage vectors)": round(
            len(texts) / len(corpus.ids), 2
        ),
        "distinct sentences / passages": round(len(unique) / len(corpus.ids), 2),
        "mean characters embedded (title + sentence)": round(sum(map(len, texts)) / len(texts), 1),
        "embedded in this run": embedder.computed,
        "embedding seconds in this run": round(time.perf_counter() - started, 1),
    }
    return found, facts


def side(corpus: Corpus, scores: np.ndarray) -> list[Ranked]:
    """A vector side from per-passage scores: the top `candidates`, best first."""
    best = np.argsort(-scores, kind="stable")[: corpus.candidates]
    return [Ranked(corpus.ids[i], float(scores[i])) for i in best]


def fused_three(sides: Sequence[list[Ranked]], shares: Sequence[float]) -> list[str]:
    """Min-max fusion of any number of sides (the shipped rule, each side normalised over its
    own list, its lowest value for a passage it did not return); ties to the earlier side's
    rank, as `fusion._ordered` does for BM25."""
    norms = [normalised(s, "minmax") for s in sides]
    ranks = [{r.key: n for n, r in enumerate(s)} for s in sides]
    keys = list(dict.fromkeys(r.key for s in sides for r in s))

    def score(key: str) -> float:
        return sum(w * scores.get(key, low) for w, (scores, low) in zip(shares, norms, strict=True))

    return sorted(keys, key=lambda k: (-score(k), *(r.get(k, math.inf) for r in ranks)))


def paired(
    ranked: list[list[str]],
    shipped: list[list[str]],
    corpus: Corpus,
    data: Dataset,
    queries: list[Query],
) -> dict[str, Any]:
    """Per question, this ranking's nDCG@10 against the shipped one's: how many gain and lose,
    and a paired bootstrap's 95% interval of the mean difference (questions resampled)."""
    qids = [q.qid for q in queries]

    def ndcg(chunks: list[str], qid: str) -> float:
        return ndcg_at(list(dict.fromkeys(corpus.docs[c] for c in chunks)), data.qrels[qid], 10)

    differences = np.asarray(
        [ndcg(a, q) - ndcg(b, q) for a, b, q in zip(ranked, shipped, qids, strict=True)]
    )
    draws = np.random.default_rng(0).integers(0, len(qids), (BOOTSTRAP, len(qids)))
    means = differences[draws].mean(1)
    return {
        "better": int((differences > 1e-9).sum()),
        "worse": int((differences < -1e-9).sum()),
        "95% interval of the gain": [round(float(np.percentile(means, p)), 4) for p in (2.5, 97.5)],
    }


Sides = dict[str, list[Ranked]]
Rank = Callable[[Sides], list[str]]


def keys(ranked: list[Ranked]) -> list[str]:
    return [r.key for r in ranked]


def variants() -> dict[str, Rank]:
    """Every ranking measured, by name, from one query's sides (`precomputed`)."""
    found: dict[str, Rank] = {
        "min-max fusion (shipped)": lambda s: fused(s["bm25"], s["passage"]),
        "passage vector alone": lambda s: keys(s["passage"]),
    }
    for top in TOPS:
        label = "sentence max" if top == 1 else "sentence top-2 mean"
        mine, either = f"sentence {top}", f"max {top}"
        found[f"{label} alone"] = lambda s, m=mine: keys(s[m])
        found[f"(a) BM25 + {label}, share {SHARE}"] = lambda s, m=mine: fused(s["bm25"], s[m])
        for shares in THREE_SIDES:
            name = f"(b) BM25 {shares[0]} / passage {shares[1]} / {label} {shares[2]}"
            found[name] = lambda s, m=mine, w=shares: fused_three(
                [s["bm25"], s["passage"], s[m]], w
            )
        found[f"(c) BM25 + max(passage, {label}), share {SHARE}"] = lambda s, e=either: fused(
            s["bm25"], s[e]
        )
    return found


def precomputed(corpus: Corpus, found: Sentences, query: Query) -> Sides:
    """The query's BM25 list and every vector side: passage cosine, sentence score, the max."""
    cosine = corpus.matrix @ query.vector
    sides = {"bm25": query.bm25, "passage": side(corpus, cosine)}
    for top in TOPS:
        scores = found.scores(query.vector, top)
        sides[f"sentence {top}"] = side(corpus, scores)
        sides[f"max {top}"] = side(corpus, np.maximum(cosine, scores))
    return sides


async def main() -> None:
    sets: dict[str, tuple[str, Dataset]] = {
        "scifact test": ("scifact", load_dataset(SHARED_EVAL / "scifact")),
        "docs QA": ("anthropic_docs_qa", load_dataset(SHARED_EVAL / "anthropic_docs_qa")),
        "scifact train": ("scifact", train_split(SHARED_EVAL / "scifact")),
    }
    result: dict[str, Any] = {"sentences": {}}
    embedded: dict[str, Sentences] = {}
    ranked: dict[str, dict[str, list[list[str]]]] = {}
    rankings = variants()
    for label, (name, data) in sets.items():
        corpus, queries = await gather(name, data)
        if name not in embedded:
            embedded[name], result["sentences"][name] = await embed_sentences(name, corpus)
        for query in queries:
            sides = precomputed(corpus, embedded[name], query)
            for variant, rank in rankings.items():
                ranked.setdefault(variant, {}).setdefault(label, []).append(rank(sides))
        shipped = ranked["min-max fusion (shipped)"][label]
        for variant in rankings:
            result.setdefault(variant, {})[label] = figures(
                ranked[variant][label], corpus, data, queries
            )
            if variant.startswith("("):
                result[variant][label]["against shipped"] = paired(
                    ranked[variant][label], shipped, corpus, data, queries
                )
        print(f"{label}: done", flush=True)
    shipped_row = result["min-max fusion (shipped)"]
    gains = {}
    for variant in rankings:
        row = result[variant]
        gains[variant] = {
            label: round(row[label]["ndcg@10"] - shipped_row[label]["ndcg@10"], 4) for label in sets
        }
    fused_variants = [v for v in rankings if v.startswith("(")]
    chosen = max(fused_variants, key=lambda v: result[v]["scifact train"]["ndcg@10"])
    result["nDCG@10 gain over shipped"] = gains
    result["gains on all three sets"] = [v for v in fused_variants if min(gains[v].values()) > 0]
    result["chosen on scifact train"] = {"variant": chosen, **result[chosen]}
    for variant in rankings:
        print(f"{variant}: {result[variant]}")
    print(f"facts: {result['sentences']}")
    print(f"gains on all three: {result['gains on all three sets']}")
    print(f"chosen on train: {result['chosen on scifact train']}")
    print(f"-> {write_result('sentence-vectors.json', result)}")


if __name__ == "__main__":
    asyncio.run(main())
