"""Where the relevance floor for unasked questions (`channels.*.min_relevance`) should sit.

An unasked question (an `auto` channel, a forum post) reaches the model only when its closest
passage has at least this cosine. A floor too high silently drops questions the docs answer; too
low, and off-topic questions cost a model call (and, with no model, get quoted passages posted).
The measure is the engine's own (`closest_passage`: the vector side's best cosine).

- **In domain** (must be kept): each evaluation set's questions against its own corpus, every
  one of which the corpus answers (SciFact test claims; Anthropic docs QA questions).
- **Off domain** (should be dropped): each set's questions against the other corpora, and the
  labelled chat-message questions against the two evaluation corpora.
- **Bundled docs, reported only:** the 60 chat questions `bench.auto_channel` sends, against
  `docs/`, split by `tests/data/bundled_docs_questions.json`. Not used to choose anything.

The indices are built once into `.bot/bench/floor/` (SciFact takes about 10 minutes to embed
without the embedding cache; the repository's `.bot/embedding-cache.sqlite` keeps the vectors),
then reused.

    python -m bench.relevance_floor [--floors 0.2 0.25 0.3 0.35 0.4]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.common import (
    REPO,
    SHARED_EVAL,
    bench_settings,
    bundled_docs_labels,
    chat_messages,
    write_result,
)
from bot.wiring import build_embedder
from core.answer.engine import closest_passage
from core.backends.sqlite.index import SqliteIndex
from core.domain.documents import SearchFilters
from core.evaluation.retrieval import load_dataset
from core.evaluation.runs import index_dataset
from core.ingest.pipeline import Ingestor
from core.ports import Embedder, SearchIndex

DATASETS = ("scifact", "anthropic_docs_qa")
BUNDLED = "bundled-docs"
CACHE = REPO / ".bot" / "embedding-cache.sqlite"
FLOORS = (0.2, 0.25, 0.3, 0.35, 0.4)


async def closest(index: SearchIndex, texts: Iterable[str]) -> list[float]:
    """Each question's closest passage, as the engine measures it before an unasked answer."""
    found = [await closest_passage(index, text, SearchFilters()) for text in texts]
    return [-1.0 if c is None else c for c in found]


async def open_index(name: str, root: Path, embedder: Embedder, **env: str) -> SqliteIndex:
    """The corpus's index under `root`, built through the product's pipeline the first time
    (`env`: settings overrides, as in the environment, e.g. another passage size)."""
    settings = bench_settings(root / name, **env)
    index = SqliteIndex(settings.index_path, embedder, settings.search)
    if not (await index.stats()).chunks:
        print(f"indexing {name} into {root / name} (once)...", flush=True)
        if name == BUNDLED:
            await Ingestor(index, embedder, settings.ingest).ingest(
                [str(REPO / "docs")], source="kb"
            )
        else:
            await index_dataset(load_dataset(SHARED_EVAL / name), index, embedder, settings)
        await index.refresh()
    return index


def kept(scores: list[float], floor: float) -> float:
    return round(sum(s >= floor for s in scores) / len(scores), 4)


def summary(scores: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(scores, n=20)
    return {
        "min": round(min(scores), 3),
        "p5": round(cuts[0], 3),
        "median": round(statistics.median(scores), 3),
        "p95": round(cuts[-1], 3),
        "max": round(max(scores), 3),
    }


def questions() -> dict[str, list[str]]:
    rows = chat_messages()
    sets = {name: list(load_dataset(SHARED_EVAL / name).queries.values()) for name in DATASETS}
    sets["chat"] = [r["text"] for r in rows if r["answer"]]
    return sets


async def measure(
    root: Path,
    floors: tuple[float, ...],
    corpora: tuple[str, ...] = DATASETS,
    cache: Path = CACHE,
) -> dict[str, Any]:
    """`corpora`: the evaluation corpora to search (CI's small version leaves SciFact's out;
    its claims are still asked, off domain)."""
    settings = bench_settings(root, BOT_EMBEDDINGS__CACHE_PATH=str(cache))
    embedder = build_embedder(settings)
    asked = questions()
    judged, grounded = bundled_docs_labels()
    scores: dict[str, list[float]] = {}
    for corpus in (*corpora, BUNDLED):
        index = await open_index(corpus, root, embedder)
        try:
            for name, texts in asked.items():
                if corpus == BUNDLED and name == "chat":
                    texts = texts[:judged]
                scores[f"{name} → {corpus}"] = await closest(index, texts)
        finally:
            await index.close()
    in_domain = [f"{c} → {c}" for c in corpora]
    off_domain = [k for k in scores if k not in in_domain and not k.endswith(BUNDLED)]
    bundled_scores = scores[f"chat → {BUNDLED}"]
    judged = zip(asked["chat"][: len(bundled_scores)], bundled_scores, strict=True)
    bundled: dict[str, list[float]] = {"grounded": [], "not covered": []}
    for text, score in judged:
        bundled["grounded" if text in grounded else "not covered"].append(score)
    everything_kept = min(min(scores[k]) for k in in_domain)
    return {
        "distributions": {k: summary(v) for k, v in scores.items()},
        "floors": [
            {
                "floor": floor,
                "in_domain_kept": {k: kept(scores[k], floor) for k in in_domain},
                "off_domain_dropped": {k: round(1 - kept(scores[k], floor), 4) for k in off_domain},
                "bundled_docs_kept": {k: kept(v, floor) for k, v in bundled.items()},
            }
            for floor in floors
        ],
        "lowest_in_domain": round(everything_kept, 3),
        "highest_floor_keeping_every_in_domain_question": max(
            (f for f in floors if f <= everything_kept), default=None
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--floors", type=float, nargs="+", default=list(FLOORS))
    parser.add_argument("--root", type=Path, default=REPO / ".bot" / "bench" / "floor")
    args = parser.parse_args()
    result = asyncio.run(measure(args.root, tuple(args.floors)))
    for row in result["floors"]:
        print(
            f"floor {row['floor']:.2f}: in domain kept {row['in_domain_kept']}; "
            f"off domain dropped {row['off_domain_dropped']}; "
            f"bundled docs kept {row['bundled_docs_kept']}"
        )
    print(
        f"lowest in-domain cosine {result['lowest_in_domain']}; highest floor keeping every "
        f"in-domain question: {result['highest_floor_keeping_every_in_domain_question']}"
    )
    print(f"-> {write_result('relevance-floor.json', result)}")


if __name__ == "__main__":
    main()
