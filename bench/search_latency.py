"""Search latency on a 50,000-chunk index, query embedding included.

The index holds SciFact's corpus chunked by the product's pipeline (about 10,600 passages with
their real MiniLM vectors from the embedding cache), copied until it reaches --chunks: each copy
keeps the text (so BM25 posting lists grow as in a real corpus) and gets its vector nudged by a
little noise (so the vector side cannot short-cut on duplicates). Search cost depends on the
number of chunks and posting lengths, not on where a vector came from, so this measures the real
path: tokenise and embed the query, FTS5 BM25, the vector side (the graph above
`search.approximate.min_chunks`), fusion, chunk fetch.

The index is built once and kept under .bot/bench/ (rebuild with --rebuild). Embedding SciFact
from a cold cache takes about 20 minutes; `bot eval retrieval --dataset ../shared/eval/scifact`
fills the same cache.

    python -m bench.search_latency [--chunks 50000] [--runs 5] [--queries 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from bench.common import REPO, SHARED_EVAL, bench_settings, percentile, write_result
from core.backends.sqlite.index import SqliteIndex
from core.config import Settings
from core.domain.documents import Chunk, DocumentRecord, DocumentWrite, SearchMode, embedding_text
from core.evaluation.retrieval import load_dataset, prepared_corpus
from core.search.embedder import CachedEmbedder, MiniLMEmbedder
from core.search.embedding_cache import EmbeddingCache
from core.search.threads import limit_blas_threads
from tests.conftest import Index

NOISE = 0.01  # per dimension: a copy stays close to, but not equal to, its original
SEED = 7
WRITE_GROUP = 256  # chunks per write batch, as the ingest pipeline groups them
PRINT_EVERY = 10_000


def queries(limit: int) -> list[str]:
    texts = []
    for name in ("scifact", "anthropic_docs_qa"):
        path = SHARED_EVAL / name / "queries.jsonl"
        texts += [json.loads(line)["text"] for line in path.read_text().splitlines()]
    rng = np.random.default_rng(SEED)
    rng.shuffle(texts)
    return texts[:limit]


async def synthetic_writes(
    embedder: CachedEmbedder, target: int, settings: Settings, group_chunks: int
) -> AsyncIterator[list[DocumentWrite]]:
    """SciFact's passages copied to `target` chunks, in batches of about `group_chunks`."""
    data = load_dataset(SHARED_EVAL / "scifact")
    docs = list(prepared_corpus(data, settings.ingest, "bench"))
    texts = [embedding_text(c) for d in docs for c in d.chunks]
    print(f"embedding {len(texts)} SciFact passages (cached after the first time)...")
    vectors = await embedder.embed_documents(texts)
    rng = np.random.default_rng(SEED)
    written, copy = 0, 0
    batch: list[DocumentWrite] = []
    while written < target:
        offset = 0
        for doc in docs:
            if written >= target:
                break
            n = len(doc.chunks)
            base = vectors[offset : offset + n]
            offset += n
            doc_id = f"{doc.record.doc_id}~{copy}"
            chunks = [
                Chunk(
                    f"{doc_id}-{c.position}",
                    doc_id,
                    "bench",
                    c.title,
                    c.heading,
                    c.url,
                    c.text,
                    c.position,
                )
                for c in doc.chunks
            ]
            noisy = base + rng.normal(0, NOISE, base.shape).astype(np.float32) if copy else base
            noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
            record = DocumentRecord(doc_id, "bench", doc.record.title, doc.record.url, "x", n)
            batch.append(DocumentWrite(record, chunks, noisy.astype(np.float32)))
            written += n
            if sum(len(w.chunks) for w in batch) >= group_chunks:
                yield batch
                batch = []
        copy += 1
    if batch:
        yield batch


async def build(index: Index, embedder: CachedEmbedder, target: int, settings: Settings) -> None:
    written = 0
    async for batch in synthetic_writes(embedder, target, settings, WRITE_GROUP):
        failed = await index.write_documents(batch)
        if failed:
            raise RuntimeError(f"{len(failed)} documents failed: {next(iter(failed.values()))}")
        written += sum(len(w.chunks) for w in batch)
        if written % PRINT_EVERY < WRITE_GROUP:
            print(f"  {written} chunks written")


async def timed_searches(
    index: Index, texts: list[str], k: int, runs: int
) -> dict[str, dict[str, object]]:
    """p50 and p95 per mode, each the median over `runs` passes over all queries."""
    modes: dict[str, dict[str, object]] = {}
    for mode in SearchMode:
        p50s, p95s = [], []
        for _ in range(runs):
            latencies = []
            for text in texts:
                t = time.perf_counter()
                await index.search(text, k=k, mode=mode)
                latencies.append((time.perf_counter() - t) * 1000)
            p50s.append(statistics.median(latencies))
            p95s.append(percentile(latencies, 95))
        modes[mode.value] = {
            "p50_ms_median": round(statistics.median(p50s), 2),
            "p95_ms_median": round(statistics.median(p95s), 2),
            "p50_ms_runs": [round(x, 2) for x in p50s],
            "p95_ms_runs": [round(x, 2) for x in p95s],
        }
        print(
            f"{mode.value:>6}: p50 {statistics.median(p50s):.1f} ms, "
            f"p95 {statistics.median(p95s):.1f} ms (median of {runs} runs)"
        )
    return modes


def query_embedder(settings: Settings, query_threads: int | None = None) -> CachedEmbedder:
    """The real model over the shared cache, with no query cache: every search embeds.
    `query_threads` None: queries on as many ONNX threads as documents (the library's own)."""
    model = MiniLMEmbedder(
        batch_size=settings.embeddings.batch_size,
        max_tokens=settings.embeddings.max_tokens,
        threads=settings.embeddings.threads,
        query_threads=query_threads,
    )
    cache = EmbeddingCache(settings.embedding_cache_path, model.model_id, model.dimensions)
    return CachedEmbedder(model, cache, query_cache_size=0)


class Comparison(NamedTuple):
    """What a bench comparing variants of the search on this index starts from."""

    args: argparse.Namespace  # --chunks, --runs, --queries
    settings: Settings
    path: Path  # the index file every variant opens
    embedder: CachedEmbedder


def comparison(description: str | None) -> Comparison:
    """The command line of a bench comparing variants (`interleaved`) on this index, the
    shipped settings and thread caps, and the query embedder."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--chunks", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    settings = bench_settings(REPO / ".bot")  # share the main embedding cache
    path = REPO / ".bot" / "bench" / f"latency-{args.chunks}.sqlite"
    limit_blas_threads(settings.search.blas_threads)
    return Comparison(
        args, settings, path, query_embedder(settings, settings.embeddings.query_threads)
    )


async def opened(
    variants: Mapping[str, SqliteIndex], embedder: CachedEmbedder, chunks: int, settings: Settings
) -> int:
    """The latency index, built first if short (a few minutes from the embedding cache), with
    every variant's vectors loaded; its chunk count."""
    first = next(iter(variants.values()))
    stats = await first.stats()
    if stats.chunks < chunks:
        await build(first, embedder, chunks - stats.chunks, settings)
        await first.refresh()
        stats = await first.stats()
    for index in variants.values():
        await index.search("vitamin d", k=settings.search.top_k)  # loads the vectors
    return stats.chunks


async def interleaved(
    variants: Mapping[str, SqliteIndex],
    texts: Sequence[str],
    modes: Sequence[SearchMode],
    k: int,
    runs: int,
) -> dict[str, object]:
    """Each query searched on every variant in turn, the turn's first variant rotating, so a
    busy moment of the machine, or a cache one search warms, falls on all alike. Per mode and
    variant: the medians over the runs of p50 and p95, and each run's p95."""
    names = list(variants)
    figures: dict[tuple[SearchMode, str], dict[str, list[float]]] = {
        (m, name): {"p50": [], "p95": []} for m in modes for name in names
    }
    for run in range(runs):
        for mode in modes:
            latencies: dict[str, list[float]] = {name: [] for name in names}
            for n, text in enumerate(texts):
                for name in names[n % len(names) :] + names[: n % len(names)]:
                    started = time.perf_counter()
                    await variants[name].search(text, k=k, mode=mode)
                    latencies[name].append((time.perf_counter() - started) * 1000)
            for name, values in latencies.items():
                figures[(mode, name)]["p50"].append(statistics.median(values))
                figures[(mode, name)]["p95"].append(percentile(values, 95))
        print(f"run {run + 1} of {runs} done", flush=True)
    report: dict[str, object] = {}
    for (mode, name), runs_of in figures.items():
        p50, p95 = statistics.median(runs_of["p50"]), statistics.median(runs_of["p95"])
        report[f"{mode.value}, {name}"] = {
            "p50_ms_median": round(p50, 2),
            "p95_ms_median": round(p95, 2),
            "p95_ms_runs": [round(x, 2) for x in runs_of["p95"]],
        }
        print(f"{mode.value:>6}, {name}: p50 {p50:.1f} ms, p95 {p95:.1f} ms")
    return report


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--rebuild", action="store_true")
    args = parser.parse_args()

    data_dir = REPO / ".bot" / "bench"
    settings = bench_settings(REPO / ".bot")  # share the main embedding cache
    path = data_dir / f"latency-{args.chunks}.sqlite"
    if args.rebuild:
        for old in data_dir.glob(path.name + "*"):
            old.unlink()
    limit_blas_threads(settings.search.blas_threads)  # the shipped settings, as the bot runs
    embedder = query_embedder(settings, settings.embeddings.query_threads)
    index = SqliteIndex(path, embedder, settings.search)
    stats = await index.stats()
    if stats.chunks < args.chunks:
        await build(index, embedder, args.chunks - stats.chunks, settings)
        await index.refresh()  # the vector graph, as an ingest's end saves it
        stats = await index.stats()
    print(f"index: {stats.chunks} chunks in {path}")

    texts = queries(args.queries)
    started = time.perf_counter()
    await index.search(texts[0], k=settings.search.top_k)  # loads the vector matrix
    cold_ms = (time.perf_counter() - started) * 1000
    report: dict[str, object] = {
        "chunks": stats.chunks,
        "queries": len(texts),
        "runs": args.runs,
        "k": settings.search.top_k,
        "cold_first_search_ms": round(cold_ms, 1),
        "modes": await timed_searches(index, texts, settings.search.top_k, args.runs),
    }
    await index.close()
    print(f"wrote {write_result('search-latency.json', report)}")


if __name__ == "__main__":
    asyncio.run(main())
