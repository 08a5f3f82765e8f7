"""Which passage size ranks best: the same corpora chunked at several `ingest.chunk_chars`
(with overlap in proportion), each through the product's own pipeline and search.

MiniLM was trained on pairs of at most 128 word pieces and truncates at 256; the shipped 1,000
characters are about 220. Smaller passages embed closer to what the model learned and give a
claim or a question a more focused passage to match; larger ones carry more context per hit. A
document's rank is its best passage's, as in `bot eval retrieval`.

Chosen on SciFact **train** (809 claims, same corpus), confirmed on SciFact test and the
Anthropic docs QA set. Each size's indices are built once into `.bot/bench/chunks/<size>/`
(about 10 minutes per size for SciFact on two cores; the embedding cache keeps vectors by
content, so a rerun is quick).

    python -m bench.chunk_size [--sizes 500:75 1000:150] [--sets "docs QA"]
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import REPO, SHARED_EVAL, bench_settings, write_result
from bench.ranking_experiments import train_split
from bench.relevance_floor import CACHE, open_index
from bot.wiring import build_embedder
from core.domain.documents import SearchMode
from core.evaluation.retrieval import Dataset, evaluate, load_dataset

ROOT = REPO / ".bot" / "bench" / "chunks"
SIZES = ("500:75", "700:100", "1000:150", "1200:180", "1500:225")


SET_NAMES = ("scifact train", "scifact test", "docs QA")


def sets() -> dict[str, tuple[str, Dataset]]:
    return {
        "scifact train": ("scifact", train_split(SHARED_EVAL / "scifact")),
        "scifact test": ("scifact", load_dataset(SHARED_EVAL / "scifact")),
        "docs QA": ("anthropic_docs_qa", load_dataset(SHARED_EVAL / "anthropic_docs_qa")),
    }


async def measure(
    size: str,
    data: dict[str, tuple[str, Dataset]],
    root: Path = ROOT,
    cache: Path = CACHE,
    modes: Sequence[SearchMode] = tuple(SearchMode),
    *,
    deep: bool = True,
) -> dict[str, Any]:
    """Each set's figures per search mode at one `chars:overlap` size (`deep`: recall@100
    too, from a search ten times deeper)."""
    chars, overlap = size.split(":")
    env = {"BOT_INGEST__CHUNK_CHARS": chars, "BOT_INGEST__CHUNK_OVERLAP_CHARS": overlap}
    settings = bench_settings(root / size, BOT_EMBEDDINGS__CACHE_PATH=str(cache), **env)
    embedder = build_embedder(settings)
    figures: dict[str, Any] = {}
    for label, (name, dataset) in data.items():
        index = await open_index(name, root / size, embedder, **env)
        try:
            runs = await evaluate(
                index, dataset, list(modes), shown=settings.search.top_k, deep=deep
            )
            figures[label] = {
                "chunks": (await index.stats()).chunks,
                **{r.mode.value: r.metrics for r in runs},
            }
        finally:
            await index.close()
        hybrid = figures[label][SearchMode.HYBRID.value]
        print(
            f"{size:>9} {label:<14} hybrid nDCG@10 {hybrid['ndcg@10']:.4f} "
            f"MRR@10 {hybrid['mrr@10']:.4f}",
            flush=True,
        )
    return figures


def result_name(labels: Sequence[str]) -> str:
    """`chunk-size.json` for every set; a part of them has a file of its own (the docs set's
    rows are the ones CI checks against the code, see tests/integration/test_chunk_size.py)."""
    if set(labels) == set(SET_NAMES):
        return "chunk-size.json"
    return f"chunk-size-{'-'.join(label.replace(' ', '-').lower() for label in labels)}.json"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), help="chars:overlap each")
    parser.add_argument("--sets", nargs="+", choices=SET_NAMES, default=list(SET_NAMES))
    args = parser.parse_args()
    data = {label: found for label, found in sets().items() if label in args.sets}
    result = {size: await measure(size, data) for size in args.sizes}
    print(write_result(result_name(args.sets), result))


if __name__ == "__main__":
    asyncio.run(main())
