"""What embedding passages costs in memory and time, by batch size and ONNX Runtime's memory arena.

An ingest's peak memory is mostly the embedder's: ONNX Runtime keeps the largest batch's
activations in its arena for the life of the session. Each setting runs in a fresh process (peak
RSS is a process's), the settings interleaved run by run, over the same passages: SciFact's
first abstracts chunked as the product chunks them.

    python -m bench.embed_memory [--passages 256] [--runs 3] [--batches 8,16,32]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

from bench.common import SHARED_EVAL, write_result

_KB = 1_024


def passages(count: int) -> list[str]:
    """SciFact abstracts, chunked at the shipped passage size, the first `count` passages."""
    from core.config import IngestSettings
    from core.ingest.chunker import split_text

    settings = IngestSettings()
    found: list[str] = []
    with (SHARED_EVAL / "scifact" / "corpus.jsonl").open(encoding="utf-8") as corpus:
        for line in corpus:
            doc = json.loads(line)
            text = f"{doc.get('title', '')}\n\n{doc.get('text', '')}"
            found += split_text(text, settings.chunk_chars, settings.chunk_overlap_chars)
            if len(found) >= count:
                return found[:count]
    return found


def child(batch: int, arena: bool, count: int) -> dict[str, float]:
    """One setting, in this process: load, embed, report time and peak RSS."""
    import core.search.embedder as embedder_module
    from core.search.embedder import MiniLMEmbedder

    texts = passages(count)
    shipped = embedder_module.session_options

    def options(threads: int) -> Any:
        chosen = shipped(threads)
        chosen.enable_cpu_mem_arena = arena
        return chosen

    embedder_module.session_options = options
    embedder = MiniLMEmbedder(batch_size=batch, max_tokens=256, threads=0)
    embedder.load()
    loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / _KB
    started = time.perf_counter()
    embedder.embed_sync(texts)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / _KB
    return {"seconds": seconds, "loaded_mb": loaded, "peak_mb": peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=256)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batches", default="8,16,32")
    parser.add_argument("--child", nargs=2, metavar=("BATCH", "ARENA"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(int(args.child[0]), args.child[1] == "on", args.passages)))
        return
    settings = [(b, a) for b in map(int, args.batches.split(",")) for a in ("on", "off")]
    runs: dict[str, list[dict[str, float]]] = {f"batch {b}, arena {a}": [] for b, a in settings}
    for run in range(args.runs):
        for batch, arena in settings:
            command = [sys.executable, "-m", "bench.embed_memory", "--passages"]
            command += [str(args.passages), "--child", str(batch), arena]
            out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            figures = json.loads(out.strip().splitlines()[-1])
            runs[f"batch {batch}, arena {arena}"].append(figures)
            print(f"run {run + 1}: batch {batch}, arena {arena}: {figures}", flush=True)
    table = {
        name: {
            "passages_per_s": statistics.median(args.passages / f["seconds"] for f in figures),
            "peak_mb": statistics.median(f["peak_mb"] for f in figures),
            "loaded_mb": statistics.median(f["loaded_mb"] for f in figures),
        }
        for name, figures in runs.items()
    }
    for name, row in table.items():
        print(
            f"{name:>22}: {row['passages_per_s']:6.1f} passages/s, peak {row['peak_mb']:6.0f} MB "
            f"(loaded {row['loaded_mb']:.0f} MB)"
        )
    path = write_result(
        "embed-memory.json",
        {"passages": args.passages, "runs": args.runs, "medians": table, "each": runs},
    )
    print(f"Wrote {path}")


if __name__ == "__main__":
    main()
