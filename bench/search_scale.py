"""Hybrid search from 10,000 to 1,000,000 passages: build time, size on disk, latency idle and
beside a competing CPU load, peak memory, and the approximate vector side's recall.

Each index is the latency bench's (`bench.search_latency`: SciFact's passages with their real
MiniLM vectors, copied with a little noise until the size is reached), kept under .bot/bench/
with its build time. Every size is searched in a child process of its own with the shipped
settings (`config.yaml`), so its peak RSS is that of a process serving that index and nothing
else. The child alternates idle passes and passes beside two busy processes, `--runs` of each,
over the same queries (SciFact's and the Anthropic docs set's, query embedding included, k=8);
figures are medians over the passes.

Recall@100 compares the vector side's top 100 (the graph, re-scored exactly, as searches use
it) with an exact scan of every stored vector, streamed from the file in batches.

    python -m bench.search_scale [--sizes 10000,50000,200000,1000000] [--runs 5] [--queries 200]
                                 [--build-only]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import REPO, bench_settings, peak_rss_mb, percentile, write_result
from bench.query_threads import BUSY_PROCESSES, competing_load
from bench.search_latency import build, queries, query_embedder
from core.backends.sqlite.index import SqliteIndex
from core.config import Settings
from core.domain.documents import SearchFilters
from core.search.ann import ApproximateIndex
from core.search.threads import limit_blas_threads

DATA = REPO / ".bot" / "bench"
RECALL_AT = 100
RECALL_QUERIES = 100
EXACT_BATCH = 100_000  # stored vectors per step of the exact reference scan
COPY = re.compile(r"~\d+(?=-\d+$)")  # the copy number in a synthetic chunk id


def _index_path(chunks: int) -> Path:
    return DATA / f"latency-{chunks}.sqlite"


def _on_disk(path: Path) -> int:
    return sum(
        p.stat().st_size
        for p in path.parent.glob(path.name + "*")
        if p.is_file() and not p.name.endswith(".build.json")
    )


async def _built(chunks: int, settings: Settings) -> dict[str, Any]:
    """The index of `chunks` passages and its graph, built unless kept from an earlier run."""
    path = _index_path(chunks)
    record = path.with_name(path.name + ".build.json")
    if not record.exists():  # no build time on record: build from nothing to time it
        for old in path.parent.glob(path.name + "*"):
            old.unlink()
    index = SqliteIndex(path, query_embedder(settings), settings.search)
    try:
        times = json.loads(record.read_text()) if record.exists() else {}
        if not times:
            started = time.perf_counter()
            await build(index, query_embedder(settings), chunks, settings)
            times["write_s"] = round(time.perf_counter() - started, 1)
        embedder = index.embedder
        saved = ApproximateIndex.saved_meta(
            index.graph_path, embedder.dimensions, embedder.model_id, settings.search.approximate
        )
        if saved is None or "graph_s" not in times:
            # No graph, or one built with other settings: build it as an ingest's end does.
            ApproximateIndex.delete(index.graph_path)
            started = time.perf_counter()
            await index.refresh()
            times["graph_s"] = round(time.perf_counter() - started, 1)
        record.write_text(json.dumps(times))
        await index.refresh()  # a no-op when current
    finally:
        await index.close()
    return times


async def _recall(chunks: int, settings: Settings, texts: list[str]) -> dict[str, float] | None:
    """How much of the exact top 100 the vector side finds: by chunk, and by the SciFact passage
    each chunk is a noisy copy of (which copy is found says nothing of search quality, and a
    copy's noise is of the size of int8's rounding). None when this size scans exactly."""
    if chunks < settings.search.approximate.min_chunks or not settings.search.approximate.enabled:
        return None
    embedder = query_embedder(settings, settings.embeddings.query_threads)
    index = SqliteIndex(_index_path(chunks), embedder, settings.search)
    try:
        vectors = np.stack([await embedder.embed_query(t) for t in texts])
        found = [
            {int(r.key) for r in index._vectors.ranked(v, SearchFilters(), RECALL_AT)}
            for v in vectors
        ]
        exact = _exact_top(index, vectors)
        passages = _passages(index, set().union(*found, *exact))
        by_chunk, by_passage = [], []
        for f, e in zip(found, exact, strict=True):
            by_chunk.append(len(f & e) / RECALL_AT)
            wanted = {passages[i] for i in e}
            by_passage.append(len({passages[i] for i in f} & wanted) / len(wanted))
        return {
            f"recall@{RECALL_AT}": round(float(np.mean(by_chunk)), 4),
            f"passage_recall@{RECALL_AT}": round(float(np.mean(by_passage)), 4),
        }
    finally:
        await index.close()


def _passages(index: SqliteIndex, ids: set[int]) -> dict[int, str]:
    """Each chunk's original SciFact passage: its chunk id without the copy's `~N`."""
    chunks = index._chunks_by_id(sorted(ids))
    return {i: COPY.sub("", c.chunk_id) for i, c in chunks.items()}


def _exact_top(index: SqliteIndex, vectors: np.ndarray) -> list[set[int]]:
    best_ids = np.empty((len(vectors), 0), dtype=np.int64)
    best_scores = np.empty((len(vectors), 0), dtype=np.float32)
    cursor = index._reader().execute("SELECT id, embedding FROM chunks")
    while rows := cursor.fetchmany(EXACT_BATCH):
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32)
        scores = vectors @ matrix.reshape(len(rows), -1).T
        all_ids = np.concatenate([best_ids, np.broadcast_to(ids, scores.shape)], axis=1)
        all_scores = np.concatenate([best_scores, scores], axis=1)
        keep = np.argsort(-all_scores, axis=1)[:, :RECALL_AT]
        best_ids = np.take_along_axis(all_ids, keep, axis=1)
        best_scores = np.take_along_axis(all_scores, keep, axis=1)
    return [set(row.tolist()) for row in best_ids]


async def _child(chunks: int, runs: int, n_queries: int) -> dict[str, Any]:
    """Searches in this process only: the shipped settings, idle and loaded passes alternated."""
    settings = bench_settings(REPO / ".bot")
    limit_blas_threads(settings.search.blas_threads)
    embedder = query_embedder(settings, settings.embeddings.query_threads)
    index = SqliteIndex(_index_path(chunks), embedder, settings.search)
    texts = queries(n_queries)
    k = settings.search.top_k
    started = time.perf_counter()
    await index.search(texts[0], k=k)  # loads the graph or the matrix, and the model
    cold_ms = (time.perf_counter() - started) * 1000
    figures: dict[str, dict[str, list[float]]] = {
        load: {"p50": [], "p95": []} for load in ("idle", "loaded")
    }
    for run in range(runs):
        order = ("idle", "loaded") if run % 2 == 0 else ("loaded", "idle")
        for load in order:
            busy = competing_load(BUSY_PROCESSES) if load == "loaded" else contextlib.nullcontext()
            with busy:
                latencies = []
                for text in texts:
                    t = time.perf_counter()
                    await index.search(text, k=k)
                    latencies.append((time.perf_counter() - t) * 1000)
            figures[load]["p50"].append(statistics.median(latencies))
            figures[load]["p95"].append(percentile(latencies, 95))
    side = index.vector_side()
    await index.close()
    result: dict[str, Any] = {"vector_side": side, "cold_first_search_ms": round(cold_ms, 1)}
    for load, f in figures.items():
        result[load] = {
            "p50_ms_median": round(statistics.median(f["p50"]), 2),
            "p95_ms_median": round(statistics.median(f["p95"]), 2),
            "p95_ms_runs": [round(x, 2) for x in f["p95"]],
        }
    result["peak_rss_mb"] = round(peak_rss_mb())
    return result


def _searched(chunks: int, runs: int, n_queries: int) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.search_scale", "--child", str(chunks)]
    done = subprocess.run(
        [*command, "--runs", str(runs), "--queries", str(n_queries)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,50000,200000,1000000")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--build-only", action="store_true", help="build what is missing; stop")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(await _child(args.child, args.runs, args.queries)))
        return
    settings = bench_settings(REPO / ".bot")
    rows = []
    for chunks in (int(s) for s in args.sizes.split(",")):
        print(f"{chunks} passages: building or checking the index...", flush=True)
        build_times = await _built(chunks, settings)
        if args.build_only:
            print(f"{chunks} passages: {build_times}", flush=True)
            continue
        recall = await _recall(chunks, settings, queries(RECALL_QUERIES))
        searched = _searched(chunks, args.runs, args.queries)
        row = {
            "chunks": chunks,
            **build_times,
            "disk_mb": round(_on_disk(_index_path(chunks)) / 1e6),
            **(recall or {}),
            **searched,
        }
        rows.append(row)
        print(
            f"{chunks:>9}: {row['vector_side']}; idle p50/p95 {row['idle']['p50_ms_median']}/"
            f"{row['idle']['p95_ms_median']} ms, loaded {row['loaded']['p50_ms_median']}/"
            f"{row['loaded']['p95_ms_median']} ms, RSS {row['peak_rss_mb']} MB, "
            f"disk {row['disk_mb']} MB, {recall or 'exact scan'}",
            flush=True,
        )
    if args.build_only:
        return
    report = {"runs": args.runs, "queries": args.queries, "sizes": rows}
    print(f"wrote {write_result('search-scale.json', report)}")


if __name__ == "__main__":
    asyncio.run(main())
