"""`bot search`: the index's ranked passages for a query, with both sides' ranks when asked."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from core.domain.documents import SearchFilters, SearchMode
from core.domain.text import clip, printable

if TYPE_CHECKING:
    from core.domain.documents import IndexStats, SearchHit

from bot.cli.app import EXIT_USER_ERROR, app, err, out, shown, state, typed_text

_EMPTY = (
    "the knowledge base is empty: nothing has been ingested into {location} yet. "
    "Run `bot ingest PATH` (a folder, a file or a URL) to add documents."
)


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for.", callback=typed_text)],
    k: Annotated[int, typer.Option("-k", min=1, max=100, help="How many hits.")] = 5,
    explain: Annotated[
        bool, typer.Option(help="Show BM25 rank, vector rank and fused score of each hit.")
    ] = False,
    mode: Annotated[SearchMode, typer.Option(help="Which side(s) to search.")] = SearchMode.HYBRID,
    source: Annotated[
        list[str] | None, typer.Option(help="Only these sources.", callback=typed_text)
    ] = None,
    learned: Annotated[
        bool | None, typer.Option("--learned/--not-learned", help="Only (or no) learned entries.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Search the knowledge base."""
    if not query.strip():
        err.print("error: the query is empty", soft_wrap=True)
        raise typer.Exit(EXIT_USER_ERROR)
    filters = SearchFilters(sources=tuple(source or ()), learned=learned)
    hits, why_none, empty_index = asyncio.run(_search(query, k, mode, filters))
    if as_json:
        out.print_json(json.dumps([_hit_json(h) for h in hits]))
    elif empty_index:
        err.print(shown(f"error: {why_none}"), soft_wrap=True)
    elif not hits:
        out.print(shown(why_none), soft_wrap=True)  # it names the sources asked for
    else:
        _print_hits(hits, explain)
    if empty_index:  # a setup to finish, not an answer: a script must not read it as one
        raise typer.Exit(EXIT_USER_ERROR)


async def _search(
    query: str, k: int, mode: SearchMode, filters: SearchFilters
) -> tuple[list[SearchHit], str, bool]:
    """The hits, and when there are none, why, and whether it is because the index is empty:
    an empty index and a filter that matches no document call for different actions, and "no
    results" alone names neither."""
    from bot.runtime import opened

    async with opened(state.settings) as rt:
        index = rt.backend.index
        hits = await index.search(query, k=k, mode=mode, filters=filters)
        if hits:
            return hits, "", False
        stats = await index.stats()
        if not stats.chunks:
            return hits, _EMPTY.format(location=index.location), True
        return hits, _no_hits_reason(stats, filters), False


def _no_hits_reason(stats: IndexStats, filters: SearchFilters) -> str:
    unknown = [name for name in filters.sources if name not in stats.sources]
    if unknown and len(unknown) == len(filters.sources):
        indexed = ", ".join(f"{name} ({n} passages)" for name, n in sorted(stats.sources.items()))
        return (
            f"No document has the source {', '.join(map(repr, unknown))}; the sources indexed "
            f"are: {indexed}."
        )
    if filters.learned and not stats.learned_chunks:
        return "Nothing has been learned from the web yet (--learned matches no entry)."
    return f"No passage matches this query among {stats.chunks} passages."


def _snippet(text: str) -> str:
    return clip(text, state.settings.search.snippet_chars)


def _hit_json(hit: SearchHit) -> dict[str, object]:
    c = hit.chunk
    return {
        "title": c.title,
        "heading": c.heading,
        "url": c.url,
        "doc_id": c.doc_id,
        "source": c.source,
        "learned": c.learned,
        "snippet": _snippet(c.text),
        "score": hit.score,
        "bm25_rank": hit.bm25_rank,
        "bm25_score": hit.bm25_score,
        "vector_rank": hit.vector_rank,
        "vector_score": hit.vector_score,
    }


def _rank(rank: int | None, score: float | None) -> str:
    return "–" if rank is None or score is None else f"#{rank} ({score:.3f})"


def _print_hits(hits: list[SearchHit], explain: bool) -> None:
    """Titles, links and passages are the documents' (or the web's) text: as `Text`, never
    read as markup, and `printable`."""
    for number, hit in enumerate(hits, start=1):
        c = hit.chunk
        line = Text(f"{number}. ", style="bold")
        line.append(printable(c.title), style="bold")
        if c.heading:
            line.append(f" › {printable(c.heading)}")
        if c.learned:
            line.append(" [learned]", style="yellow")
        out.print(line)
        out.print(shown(f"   {c.url}", style="cyan"), soft_wrap=True)  # a link cut opens nothing
        out.print(shown(f"   {_snippet(c.text)}"))
        if explain:
            out.print(
                Text(
                    f"   fused {hit.score:.5f} · bm25 {_rank(hit.bm25_rank, hit.bm25_score)}"
                    f" · vector {_rank(hit.vector_rank, hit.vector_score)}",
                    style="dim",
                )
            )
