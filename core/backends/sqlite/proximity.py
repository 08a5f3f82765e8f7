"""Term proximity on the embedded index's lexical side: BM25's candidates re-scored by how
closely the query's neighbouring words stand in them (BENCHMARKS.md, "Term proximity, shipped").

BM25 scores each query word on its own: a passage naming "vitamin", "D" and "deficiency" in
three unrelated sentences ranks with one that says "vitamin D deficiency". Each pair of
neighbouring query tokens counts where the second stands at most `search.proximity_window`
positions after the first, in one column (the query has lost its stop words, so "effect of
vitamin" still counts for effect-vitamin). The count, column-weighted as FTS5 weighs the
columns, is scored as BM25 scores a term, with the two tokens' idfs summed (as Lucene scores a
phrase) and no length normalisation; `search.proximity_weight` of it joins the candidate's
BM25 score. Only BM25's first `search.proximity_candidates` are re-scored, so the cost does
not grow with the index (re-scoring all 100 candidates ranks the benchmark sets the same).

FTS5 keeps every token's position but shows them to SQL only through `fts5vocab`, over a whole
table. So the candidates are copied into a temporary FTS5 table of the connection's own, with
the index's tokenizer (the same tokens and positions as the index's), and read back from it.
The temporary tables are contentless: emptied by FTS5's `delete-all` at once, where a `DELETE`
tokenises every old row again to find its entries (3.5 ms of a search's 9.5 on 100 passages).
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Mapping, Sequence
from itertools import pairwise

from core.backends.sqlite.schema import TOKENIZER
from core.config import Bm25Weights

FTS5_K1 = 1.2  # FTS5's own bm25() constant (fts5_aux.c): the pairs saturate as the terms do
FTS5_IDF_FLOOR = 1e-6  # FTS5's floor under a term's idf (a term in over half the rows)
_COLUMNS = ("title", "heading", "text", "keywords")  # the index's FTS5 columns, in order
_TABLES = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.near_query"
    f" USING fts5(term, tokenize = '{TOKENIZER}', content = '')",
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.near_query_tokens"
    " USING fts5vocab(temp, 'near_query', 'instance')",
    f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.near USING fts5({', '.join(_COLUMNS)},"
    f" tokenize = '{TOKENIZER}', content = '')",
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.near_tokens USING fts5vocab(temp, 'near', 'instance')",
)


def proximity_scores(
    db: sqlite3.Connection,
    terms: Sequence[str],
    idf: Mapping[str, float],
    rows: Sequence[int],
    columns: Bm25Weights,
    window: int,
) -> dict[int, float]:
    """Each candidate row's pair score (rows without a pair: absent). `terms` are the query's
    terms as the lexical side searched them, in the query's order; `idf` each term's idf."""
    tokens = _query_tokens(db, terms, idf)
    pairs = {(a, b): ia + ib for (a, ia), (b, ib) in pairwise(tokens) if a != b}
    if not pairs or not rows:
        return {}
    db.execute("INSERT INTO temp.near (near) VALUES ('delete-all')")
    marks = ", ".join("?" * len(rows))
    db.execute(
        f"INSERT INTO temp.near (rowid, {', '.join(_COLUMNS)})"  # noqa: S608 (fixed names, values bound)
        f" SELECT id, {', '.join(_COLUMNS)} FROM chunks WHERE id IN ({marks})",
        list(rows),
    )
    wanted = sorted({t for pair in pairs for t in pair})
    # token -> (row, column) -> its offsets there
    at: dict[str, dict[tuple[int, int], set[int]]] = defaultdict(lambda: defaultdict(set))
    for token, row, column, offset in db.execute(
        f"SELECT term, doc, col, offset FROM temp.near_tokens"  # noqa: S608 (placeholders only)
        f" WHERE term IN ({', '.join('?' * len(wanted))})",
        wanted,
    ):
        at[token][(row, _COLUMNS.index(column))].add(offset)
    weights = (columns.title, columns.heading, columns.text, columns.keywords)
    scores: dict[int, float] = defaultdict(float)
    for (first, second), pair_idf in pairs.items():
        counts: dict[int, float] = defaultdict(float)
        seconds = at.get(second, {})
        for (row, column), offsets in at.get(first, {}).items():
            if after := seconds.get((row, column)):
                near = sum(1 for o in offsets for d in range(1, window + 1) if o + d in after)
                counts[row] += weights[column] * near
        for row, count in counts.items():
            if count:
                scores[row] += pair_idf * count * (FTS5_K1 + 1) / (count + FTS5_K1)
    return dict(scores)


def _query_tokens(
    db: sqlite3.Connection, terms: Sequence[str], idf: Mapping[str, float]
) -> list[tuple[str, float]]:
    """The query's tokens in order, as the index's tokenizer makes them (a term may be more
    than one: `api_key`), each with its term's idf."""
    for statement in _TABLES:
        db.execute(statement)
    db.execute("INSERT INTO temp.near_query (near_query) VALUES ('delete-all')")
    db.executemany(
        "INSERT INTO temp.near_query (rowid, term) VALUES (?, ?)", enumerate(terms, start=1)
    )
    found = db.execute(
        "SELECT doc, offset, term FROM temp.near_query_tokens ORDER BY doc, offset"
    ).fetchall()
    return [(token, idf.get(terms[row - 1], 0.0)) for row, _, token in found]
