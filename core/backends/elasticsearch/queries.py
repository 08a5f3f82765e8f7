"""The search requests the Elasticsearch backend sends: BM25F over the weighted fields, kNN over
the embeddings, both under the same filters, and the server's own RRF when licensed."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from core.backends.elasticsearch.schema import CHUNK
from core.config import ElasticsearchSettings, SearchSettings
from core.domain.documents import SearchFilters, Vectors
from core.search.terms import query_terms


def filter_clauses(filters: SearchFilters) -> list[dict[str, Any]]:
    clauses: list[dict[str, Any]] = [{"term": {"kind": CHUNK}}]
    if filters.sources:
        clauses.append({"terms": {"source": list(filters.sources)}})
    if filters.doc_ids:
        clauses.append({"terms": {"doc_id": list(filters.doc_ids)}})
    if filters.learned is not None:
        clauses.append({"term": {"learned": filters.learned}})
    return clauses


def bm25_query(query: str, filters: SearchFilters, search: SearchSettings) -> dict[str, Any]:
    """BM25F for the shared query terms (`core.search.terms`), the words SQLite searches too."""
    terms = " ".join(query_terms(query))
    return {
        "bool": {
            "must": [{"combined_fields": {"query": terms, "fields": bm25_fields(search)}}],
            "filter": filter_clauses(filters),
        }
    }


def proximity_rescore(query: str, search: SearchSettings, window: int) -> dict[str, Any] | None:
    """Term proximity, as on SQLite (`core.backends.sqlite.proximity`): BM25's first `window`
    hits re-scored, `search.proximity_weight` of a phrase query per pair of neighbouring query
    terms joining their score. The slop lets the second term stand up to `proximity_window`
    positions after the first. Lucene's sloppy phrase differs in two details: it also takes
    the pair swapped (at a higher cost) and weighs a match by its closeness, where SQLite
    counts ordered matches only (BENCHMARKS.md, "Term proximity, shipped")."""
    terms = query_terms(query)
    pairs = list(dict.fromkeys(f"{a} {b}" for a, b in pairwise(terms) if a != b))
    if not search.proximity_weight or not pairs:
        return None
    phrase = {"type": "phrase", "slop": search.proximity_window - 1}
    should = [
        {"multi_match": {"query": pair, "fields": bm25_fields(search), **phrase}} for pair in pairs
    ]
    return {
        "window_size": window,
        "query": {
            "rescore_query": {"bool": {"should": should}},
            "query_weight": 1.0,
            "rescore_query_weight": search.proximity_weight,
        },
    }


def bm25_fields(search: SearchSettings) -> list[str]:
    """BM25F over the weighted fields, like FTS5's weighted columns on the SQLite side.

    `combined_fields` scores the fields as one (per-field BM25 summed, `most_fields`, was
    0.05 nDCG@10 worse on the Anthropic docs set); it takes boosts of at least 1, so the
    weights are scaled to make the smallest 1, and a field weighted 0 is left out.
    """
    weights = search.bm25_columns.model_dump()
    smallest = min((w for w in weights.values() if w > 0), default=1.0)
    return [f"{field}^{w / smallest:g}" for field, w in weights.items() if w > 0]


def knn_query(
    vector: Vectors, filters: SearchFilters, limit: int, settings: ElasticsearchSettings
) -> dict[str, Any]:
    return {
        "field": "embedding",
        "query_vector": [float(x) for x in vector],
        "k": limit,
        "num_candidates": max(limit, settings.num_candidates),
        "filter": filter_clauses(filters),
    }


def rrf_retriever(
    query: str,
    vector: Vectors,
    filters: SearchFilters,
    limit: int,
    search: SearchSettings,
    settings: ElasticsearchSettings,
) -> dict[str, Any]:
    """The server's `rrf` retriever over both sides (a paid licence feature)."""
    return {
        "rrf": {
            "retrievers": [
                {"standard": {"query": bm25_query(query, filters, search)}},
                {"knn": knn_query(vector, filters, limit, settings)},
            ],
            "rank_constant": search.rrf_k,
            "rank_window_size": limit,
        }
    }
