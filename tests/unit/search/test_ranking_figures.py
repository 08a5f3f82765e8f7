"""The ranking experiments' figures: the per-document ones, and what the model is shown. A
ranking that puts one document's passages first scores the same per document and shows the
model fewer relevant documents; the figures must tell those apart."""

from __future__ import annotations

import numpy as np

from bench.ranking_experiments import Corpus, Query, figures
from core.evaluation.retrieval import Dataset


def _corpus(top_k: int) -> Corpus:
    docs = {"a1": "A", "a2": "A", "a3": "A", "b1": "B", "c1": "C"}
    return Corpus(list(docs), docs, np.zeros((5, 2), dtype=np.float32), 100, top_k, 0)


def test_one_documents_passages_first_shows_fewer_relevant_documents() -> None:
    data = Dataset("t", {}, {"q": "?"}, {"q": {"A": 1, "B": 1}})
    queries = [Query("q", np.zeros(2, dtype=np.float32), [])]
    spread = figures([["a1", "b1", "a2", "a3", "c1"]], _corpus(2), data, queries)
    bunched = figures([["a1", "a2", "a3", "b1", "c1"]], _corpus(2), data, queries)
    assert spread["ndcg@10"] == bunched["ndcg@10"] == 1.0
    assert spread["relevant shown in top 2"] == 1.0
    assert spread["documents in top 2"] == 2
    assert bunched["relevant shown in top 2"] == 0.5
    assert bunched["documents in top 2"] == 1
    # Through the search's per-document limit, as the product ranks, the two are alike.
    limited = figures([["a1", "a2", "a3", "b1", "c1"]], _corpus(2), data, queries, per_document=1)
    assert limited == spread
