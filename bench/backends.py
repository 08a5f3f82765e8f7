"""Both index backends side by side on the same chunks: ingest throughput (vectors from the
embedding cache, so this is the index's write path: bulk requests or SQLite transactions) and
search latency p50/p95 per mode (query embedding included).

The corpus is the one `bench.search_latency` builds: SciFact's passages with their real MiniLM
vectors, copied with nudged vectors up to --chunks. Each backend gets a fresh index, and each
ingest run starts from an empty one.

Without --es-url the script starts noida-db, the Elasticsearch emulator the tests use, on a free
port: its figures are the emulator's (a single Go process with its own BM25 and HNSW code), not
a real cluster's. With --es-url (and ELASTICSEARCH_API_KEY or ELASTICSEARCH_PASSWORD + --es-user
in the environment) it measures that cluster, under a throwaway index prefix.

    python -m bench.backends [--chunks 50000] [--ingest-runs 1] [--runs 3] [--queries 100]
                             [--backends sqlite,elasticsearch] [--es-url URL [--es-user NAME]]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from bench.common import REPO, RESULTS, bench_settings, write_result
from bench.search_latency import build, queries, query_embedder, timed_searches
from bot.wiring import open_backend
from core.config import Settings
from core.ports import Backend
from core.search.embedder import CachedEmbedder
from tests.fakes.elasticsearch_emulator import NoidaServer

RESULT = "backends.json"


async def fresh_backend(settings: Settings, embedder: CachedEmbedder, scratch: Path) -> Backend:
    if settings.search.backend == "sqlite":
        return await open_backend(settings, embedder, scratch / f"{uuid.uuid4().hex}.sqlite")
    es = settings.elasticsearch.model_copy(update={"index_prefix": f"bench-{uuid.uuid4().hex[:8]}"})
    return await open_backend(settings.model_copy(update={"elasticsearch": es}), embedder)


async def discard(backend: Backend) -> None:
    await backend.drop()
    await backend.close()


async def measure(
    settings: Settings, embedder: CachedEmbedder, args: argparse.Namespace, scratch: Path
) -> dict[str, object]:
    backend = settings.search.backend
    rates = []
    opened = None
    for run in range(args.ingest_runs):
        if opened is not None:
            await discard(opened)
        opened = await fresh_backend(settings, embedder, scratch)
        index = opened.index
        started = time.perf_counter()
        await build(index, embedder, args.chunks, settings)
        seconds = time.perf_counter() - started
        rates.append(args.chunks / seconds)
        print(f"{backend}: ingest run {run + 1}: {args.chunks / seconds:.0f} chunks/s")
    assert opened is not None
    index = opened.index
    try:
        chunks = (await index.stats()).chunks
        texts = queries(args.queries)
        await index.search(texts[0], k=settings.search.top_k)  # warm: caches, matrix, segments
        modes = await timed_searches(index, texts, settings.search.top_k, args.runs)
    finally:
        await discard(opened)
    return {
        "chunks": chunks,
        "ingest_chunks_per_s_median": round(statistics.median(rates), 1),
        "ingest_chunks_per_s_runs": [round(r, 1) for r in rates],
        "search": modes,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=50_000)
    parser.add_argument("--ingest-runs", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--es-url", help="A real cluster (default: start noida-db)")
    parser.add_argument("--es-user", help="Basic auth user (password: ELASTICSEARCH_PASSWORD)")
    parser.add_argument(
        "--backends",
        default="sqlite,elasticsearch",
        help="Which to measure; the others' figures already in the result file are kept",
    )
    args = parser.parse_args()
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]

    emulator = None
    with tempfile.TemporaryDirectory(prefix="bench-backends-") as tmp:
        scratch = Path(tmp)
        url = args.es_url
        if url is None and "elasticsearch" in backends:
            emulator = NoidaServer(scratch / "noida").start()
            url = emulator.url
        env = {
            "ELASTICSEARCH_URL": url or "",
            "BOT_ELASTICSEARCH__NUMBER_OF_REPLICAS": "0",
            "BOT_ELASTICSEARCH__REQUEST_TIMEOUT_S": "120",
        }
        if args.es_user:
            env["BOT_ELASTICSEARCH__USERNAME"] = args.es_user
        base = bench_settings(REPO / ".bot", **env)  # share the main embedding cache
        embedder = query_embedder(base)
        previous = RESULTS / RESULT
        report: dict[str, object] = json.loads(previous.read_text()) if previous.exists() else {}
        report.update(chunks=args.chunks, queries=args.queries, runs=args.runs)
        if "elasticsearch" in backends:
            report["elasticsearch_server"] = "noida-db emulator" if emulator else "--es-url"
        try:
            for backend in backends:
                search = base.search.model_copy(update={"backend": backend})
                settings = base.model_copy(update={"search": search})
                report[backend] = await measure(settings, embedder, args, scratch)
        finally:
            if emulator is not None:
                emulator.stop()
    print(f"wrote {write_result(RESULT, report)}")


if __name__ == "__main__":
    asyncio.run(main())
