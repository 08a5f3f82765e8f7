"""`bot report --html` on a big answer log: wall time and peak memory of the command.

A month of seeded answers (`tests/fakes/answer_log.py`: one in three a question the bundled
docs don't cover, in 12 topics; the rest answered with citations; votes and reasons) is written
into a scratch data dir beside an index of the bundled docs, then `bot report --since 30d --html`
runs as its own process, as an operator would run it, several times. Peak memory is the
process's maximum resident set (its own rusage, from wait4); the seeding runs in a process of
its own first, so no measured run starts as a fork of a big parent. With `--screenshot FILE`
the page of the last run is also photographed by headless Chromium (the README's picture).

    python -m bench.report [--answers 10000] [--runs 3] [--screenshot assets/report.png]

With `--distinct-missed N` the questions the docs miss are drawn from N distinct texts (the
labelled ones, then each again with a case number) rather than the 168 labelled ones in turn:
a log whose knowledge gaps hold tens of thousands of distinct questions, which only the
`insights.gap_max_questions` most asked are grouped of (results in report-ANSWERS-N.json).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import REPO, bench_settings, write_result
from bot.runtime import opened
from core.ingest.pipeline import Ingestor
from tests.fakes.answer_log import record, seeded

KIB = 1024
SCREEN = "1280,2000"


async def seed(data_dir: Path, answers: int, distinct_missed: int | None) -> float:
    settings = bench_settings(data_dir)
    async with opened(settings) as rt:
        await Ingestor(rt.backend.index, rt.embedder, settings.ingest).ingest(
            [str(REPO / "docs")], source="docs"
        )
        documents = list((await rt.backend.index.documents()).values())
        started = time.perf_counter()
        entries = seeded(answers, documents, distinct_missed=distinct_missed)
        await record(rt.backend.platform_state(60), entries, time.time())
        return time.perf_counter() - started


def run_measured(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one child process, its own rusage (wait4), not the
    largest of every child so far."""
    started = time.perf_counter()
    child = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        assert child.stderr is not None
        raise SystemExit(f"{' '.join(command[2:])} failed: {child.stderr.read().strip()[-500:]}")
    return seconds, usage.ru_maxrss / KIB


def one_report(data_dir: Path, page: Path) -> dict[str, Any]:
    env = {**os.environ, "BOT_STORAGE__DATA_DIR": str(data_dir), "BOT_LOGGING__LEVEL": "WARNING"}
    figures = page.with_suffix(".json")
    command = [
        *(sys.executable, "-m", "bot", "report", "--since", "30d"),
        *("--html", str(page), "--json", str(figures)),
    ]
    seconds, peak_mb = run_measured(command, env)
    return {"seconds": round(seconds, 2), "peak_rss_mb": round(peak_mb, 1)}


def screenshot(page: Path, target: Path) -> None:
    chrome = shutil.which("chromium") or shutil.which("chromium-browser")
    if chrome is None:
        raise SystemExit("no chromium for --screenshot: apt-get install chromium")
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            chrome,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--window-size={SCREEN}",
            f"--screenshot={target}",
            page.as_uri(),
        ],
        capture_output=True,
        check=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--answers", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--screenshot", type=Path, default=None)
    parser.add_argument("--distinct-missed", type=int, default=None)
    parser.add_argument("--seed-into", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.seed_into is not None:  # the seeding child: the measured runs start from a lean parent
        seed_s = asyncio.run(seed(args.seed_into, args.answers, args.distinct_missed))
        print(f"seeded {args.answers} answers in {seed_s:.1f} s")
        return
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        data_dir = Path(tmp)
        command = [sys.executable, "-m", "bench.report", "--answers", str(args.answers)]
        if args.distinct_missed is not None:
            command += ["--distinct-missed", str(args.distinct_missed)]
        subprocess.run([*command, "--seed-into", str(data_dir)], check=True)
        page = data_dir / "report.html"
        figures = data_dir / "report.json"
        runs = []
        for n in range(args.runs):
            runs.append(one_report(data_dir, page))
            print(f"run {n + 1}: {runs[-1]}")
        size_kb = round(page.stat().st_size / KIB, 1)
        gaps = json.loads(figures.read_text(encoding="utf-8"))
        if args.screenshot is not None:
            screenshot(page, args.screenshot)
            print(f"screenshot: {args.screenshot}")
    result = {
        "answers": args.answers,
        "runs": runs,
        "seconds_median": statistics.median(r["seconds"] for r in runs),
        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
        "html_kb": size_kb,
        "gaps": len(gaps["gaps"]),
        "ungrouped_questions": gaps["ungrouped_questions"],
        "cpus": os.cpu_count(),
    }
    if args.distinct_missed is not None:
        result["distinct_missed"] = args.distinct_missed
    name = "report.json"
    if args.distinct_missed is not None:
        name = f"report-{args.answers}-{args.distinct_missed}.json"
    path = write_result(name, result)
    print(
        f"bot report --html on {args.answers} answers: {result['seconds_median']} s (median), "
        f"peak RSS {result['peak_rss_mb']} MB, page {size_kb} KB -> {path}"
    )


if __name__ == "__main__":
    main()
