"""Turning free text into a safe FTS5 query.

User and model text must never reach FTS5's query syntax (quotes, NEAR, column filters, `*`):
a stray operator is a syntax error or a different search. The query is the shared query terms
(`core.search.terms`: word tokens only, no stop words), each quoted and ORed, so BM25 ranks by
how many and how rare the terms are.
"""

from __future__ import annotations


def fts_or_expression(terms: list[str]) -> str:
    """An FTS5 MATCH string (`"a" OR "b"`); terms are word characters only, so quoting is safe."""
    return " OR ".join(f'"{t}"' for t in terms)


def within_postings_budget(terms: list[str], frequency: dict[str, int], budget: int) -> list[str]:
    """The rarest terms whose document frequencies add up to at most `budget` (at least one).

    BM25 work grows with every (chunk, term) match, and the commonest terms bring the most
    matches for the least ranking signal (lowest IDF): they go first, as with Elasticsearch's
    `cutoff_frequency`. Terms that match nothing are dropped; order of the rest is kept.
    """
    present = [t for t in terms if frequency.get(t, 0) > 0]
    kept: set[str] = set()
    total = 0
    for term in sorted(present, key=lambda t: frequency[t]):
        if kept and total + frequency[term] > budget:
            break
        kept.add(term)
        total += frequency[term]
    return [t for t in present if t in kept]
