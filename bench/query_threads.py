"""Hybrid search latency by thread setting, on an idle machine and beside a competing CPU load.

Three settings, interleaved pass by pass in one process over the same index and queries:
- `default`: BLAS and ONNX Runtime with their own thread counts (one per core);
- `blas1`: BLAS capped at one thread (threadpoolctl: `search.blas_threads: 1`);
- `blas1+onnx1`: and the query's embedding on one ONNX thread too (`embeddings.query_threads:
  1`): the shipped defaults.

"Loaded" runs the same passes while two processes spin on the CPU (this machine has two cores).
The index is the latency bench's (SciFact copied to --chunks passages, kept under .bot/bench/).

    python -m bench.query_threads [--chunks 50000] [--runs 5] [--queries 200]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

from threadpoolctl import threadpool_limits

from bench.common import REPO, bench_settings, percentile, write_result
from bench.search_latency import build, queries, query_embedder
from core.backends.sqlite.index import SqliteIndex

BUSY_PROCESSES = 2
SETTLE_S = 2.0  # for the busy processes to take the cores before a loaded pass


@contextlib.contextmanager
def competing_load(processes: int) -> Iterator[None]:
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    time.sleep(SETTLE_S)
    try:
        yield
    finally:
        for process in busy:
            process.kill()
            process.wait()


async def one_pass(index: SqliteIndex, texts: list[str], k: int, blas: int | None) -> list[float]:
    limits = threadpool_limits(limits=blas, user_api="blas") if blas else contextlib.nullcontext()
    latencies = []
    with limits:
        for text in texts:
            started = time.perf_counter()
            await index.search(text, k=k)
            latencies.append((time.perf_counter() - started) * 1000)
    return latencies


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()

    settings = bench_settings(REPO / ".bot")
    path = REPO / ".bot" / "bench" / f"latency-{args.chunks}.sqlite"
    default_embedder = query_embedder(settings)
    default_index = SqliteIndex(path, default_embedder, settings.search)
    if (await default_index.stats()).chunks < args.chunks:
        await build(default_index, default_embedder, args.chunks, settings)
    one_thread_index = SqliteIndex(path, query_embedder(settings, 1), settings.search)
    variants: dict[str, tuple[SqliteIndex, int | None]] = {
        "default": (default_index, None),
        "blas1": (default_index, 1),
        "blas1+onnx1": (one_thread_index, 1),
    }
    texts = queries(args.queries)
    k = settings.search.top_k
    for index, _ in variants.values():
        await index.search(texts[0], k=k)  # loads the vector matrix and the model

    results: dict[str, Any] = {"chunks": args.chunks, "queries": len(texts), "k": k}
    for load in ("idle", "loaded"):
        figures: dict[str, dict[str, list[float]]] = {v: {"p50": [], "p95": []} for v in variants}
        context = competing_load(BUSY_PROCESSES) if load == "loaded" else contextlib.nullcontext()
        with context:
            for run in range(args.runs):
                turn = run % len(variants)
                order = list(variants)[turn:] + list(variants)[:turn]
                for name in order:
                    index, blas = variants[name]
                    latencies = await one_pass(index, texts, k, blas)
                    figures[name]["p50"].append(statistics.median(latencies))
                    figures[name]["p95"].append(percentile(latencies, 95))
        results[load] = {
            name: {
                "p50_ms_median": round(statistics.median(f["p50"]), 2),
                "p95_ms_median": round(statistics.median(f["p95"]), 2),
                "p95_ms_runs": [round(x, 2) for x in f["p95"]],
            }
            for name, f in figures.items()
        }
        for name, row in results[load].items():
            p50, p95 = row["p50_ms_median"], row["p95_ms_median"]
            print(f"{load:>6} {name:>12}: p50 {p50} ms, p95 {p95} ms")
    for index, _ in variants.values():
        await index.close()
    print(f"wrote {write_result('query-threads.json', results)}")


if __name__ == "__main__":
    asyncio.run(main())
