"""BM25's first candidates read again token by token, for what FTS5's `bm25()` cannot score:
term proximity (`proximity`) and the terms the postings budget left out (`left_out`).

FTS5 keeps every token's position but shows them to SQL only through `fts5vocab`, over a whole
table. So the candidates are copied into a temporary FTS5 table of the connection's own, with
the index's tokenizer (the same tokens and positions as the index's), and read back from it.
The temporary tables are contentless: emptied by FTS5's `delete-all` at once, where a `DELETE`
tokenises every old row again to find its entries (3.5 ms of a search's 9.5 on 100 passages).

A candidate's length and the index's average length, which BM25 normalises by, are read from
FTS5's own records (`%_docsize`, and the averages record of `%_data`): varints in SQLite's
format, part of FTS5's documented file format.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Sequence

from core.backends.sqlite.schema import TOKENIZER
from core.config import Bm25Weights

COLUMNS = ("title", "heading", "text", "keywords")  # the index's FTS5 columns, in order
_AVERAGES_ROWID = 1  # FTS5_AVERAGES_ROWID: the row count, then each column's token total
_VARINT_LAST = 8  # SQLite's varint: up to 8 bytes of 7 bits, then a ninth of all 8
_TABLES = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.near_query"
    f" USING fts5(term, tokenize = '{TOKENIZER}', content = '')",
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.near_query_tokens"
    " USING fts5vocab(temp, 'near_query', 'instance')",
    f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.near USING fts5({', '.join(COLUMNS)},"
    f" tokenize = '{TOKENIZER}', content = '')",
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.near_tokens USING fts5vocab(temp, 'near', 'instance')",
)

# token -> (row, column index) -> the token's offsets there
Positions = dict[str, dict[tuple[int, int], set[int]]]


def column_weights(columns: Bm25Weights) -> tuple[float, ...]:
    """The columns' BM25 weights in the index's column order (a position's column index)."""
    return tuple(float(getattr(columns, name)) for name in COLUMNS)


def query_tokens(db: sqlite3.Connection, terms: Sequence[str]) -> list[list[str]]:
    """Each term's tokens, in order, as the index's tokenizer makes them (a term may be more
    than one: `api_key`; its stem: `running` -> `run`)."""
    for statement in _TABLES:
        db.execute(statement)
    db.execute("INSERT INTO temp.near_query (near_query) VALUES ('delete-all')")
    db.executemany(
        "INSERT INTO temp.near_query (rowid, term) VALUES (?, ?)", enumerate(terms, start=1)
    )
    tokens: list[list[str]] = [[] for _ in terms]
    for row, _, token in db.execute(
        "SELECT doc, offset, term FROM temp.near_query_tokens ORDER BY doc, offset"
    ):
        tokens[row - 1].append(token)
    return tokens


def positions(db: sqlite3.Connection, rows: Sequence[int], tokens: set[str]) -> Positions:
    """Where each of `tokens` stands in each candidate row (`query_tokens` first)."""
    db.execute("INSERT INTO temp.near (near) VALUES ('delete-all')")
    if not rows or not tokens:
        return {}
    marks = ", ".join("?" * len(rows))
    db.execute(
        f"INSERT INTO temp.near (rowid, {', '.join(COLUMNS)})"  # noqa: S608 (fixed names, values bound)
        f" SELECT id, {', '.join(COLUMNS)} FROM chunks WHERE id IN ({marks})",
        list(rows),
    )
    wanted = sorted(tokens)
    at: dict[str, dict[tuple[int, int], set[int]]] = defaultdict(lambda: defaultdict(set))
    for token, row, column, offset in db.execute(
        f"SELECT term, doc, col, offset FROM temp.near_tokens"  # noqa: S608 (placeholders only)
        f" WHERE term IN ({', '.join('?' * len(wanted))})",
        wanted,
    ):
        at[token][(row, COLUMNS.index(column))].add(offset)
    return at


def lengths(db: sqlite3.Connection, rows: Sequence[int]) -> dict[int, int]:
    """Each row's length in tokens, all columns together (what FTS5's bm25() divides by)."""
    marks = ", ".join("?" * len(rows))
    found = db.execute(
        f"SELECT id, sz FROM chunks_fts_docsize WHERE id IN ({marks})",  # noqa: S608 (placeholders)
        list(rows),
    )
    return {int(row): sum(varints(size)) for row, size in found}


def average_length(db: sqlite3.Connection) -> float:
    """The index's average row length in tokens, as FTS5's bm25() computes it."""
    found = db.execute(
        "SELECT block FROM chunks_fts_data WHERE id = ?", (_AVERAGES_ROWID,)
    ).fetchone()
    if found is None:
        return 0.0
    count, *totals = varints(found[0])
    return sum(totals) / count if count else 0.0


def varints(blob: bytes) -> list[int]:
    """The unsigned varints one after another in `blob`, in SQLite's format."""
    values, at = [], 0
    while at < len(blob):
        value = 0
        for n in range(_VARINT_LAST + 1):
            byte = blob[at]
            at += 1
            if n == _VARINT_LAST:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if byte < 0x80:
                break
        values.append(value)
    return values
