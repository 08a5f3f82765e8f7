"""Re-ingest speed: a first ingest (cold embedding cache) against re-ingesting the same corpus.

The corpus is the Anthropic docs QA set written out as Markdown files (one per chunk of the
original docs), or any folder given with --corpus. Each run starts from an empty data dir.

    python -m bench.reingest [--runs 3] [--corpus DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import SHARED_EVAL, bench_settings, write_result
from bot.wiring import build_embedder, open_backend
from core.domain.documents import Outcome
from core.ingest.pipeline import Ingestor


def materialise_anthropic_docs(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    source = SHARED_EVAL / "anthropic_docs_qa" / "corpus.jsonl"
    for n, line in enumerate(source.read_text(encoding="utf-8").splitlines()):
        doc = json.loads(line)
        (folder / f"doc{n:04d}.md").write_text(f"# {doc['title']}\n\n{doc['text']}\n")
    return folder


async def one_run(corpus: Path, data_dir: Path) -> dict[str, float]:
    settings = bench_settings(data_dir)
    embedder = build_embedder(settings)
    backend = await open_backend(settings, embedder)
    index = backend.index
    ingestor = Ingestor(index, embedder, settings.ingest)
    started = time.perf_counter()
    first = await ingestor.ingest([str(corpus)], source="bench")
    first_s = time.perf_counter() - started
    started = time.perf_counter()
    again = await ingestor.ingest([str(corpus)], source="bench")
    again_s = time.perf_counter() - started
    await backend.close()
    assert again.counts[Outcome.UNCHANGED] == first.counts[Outcome.ADDED]
    return {
        "documents": first.counts[Outcome.ADDED],
        "chunks": first.chunks_written,
        "first_s": first_s,
        "reingest_s": again_s,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--corpus", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-reingest-") as tmp:
        corpus = args.corpus or materialise_anthropic_docs(Path(tmp) / "corpus")
        runs = []
        for n in range(args.runs):
            runs.append(await one_run(corpus, Path(tmp) / f"data{n}"))
            print(
                f"run {n + 1}: first {runs[-1]['first_s']:.2f}s, "
                f"re-ingest {runs[-1]['reingest_s']:.3f}s"
            )
    first = statistics.median(r["first_s"] for r in runs)
    again = statistics.median(r["reingest_s"] for r in runs)
    result = {
        "corpus": str(args.corpus or "anthropic_docs_qa as Markdown files"),
        "documents": runs[0]["documents"],
        "chunks": runs[0]["chunks"],
        "runs": runs,
        "first_ingest_s_median": round(first, 3),
        "reingest_s_median": round(again, 4),
        "speedup_median": round(first / again, 1),
    }
    path = write_result("reingest.json", result)
    print(
        f"median first ingest {first:.2f}s, median re-ingest {again:.3f}s, "
        f"speed-up {first / again:.0f}x ({path})"
    )


if __name__ == "__main__":
    asyncio.run(main())
