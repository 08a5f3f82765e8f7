"""Helpers shared by the benchmark scripts: settings in a scratch dir, stats, result files."""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from core.config import IngestSettings, Settings
from core.config_loader import load_settings
from core.ingest.sections import ParseLimits

REPO = Path(__file__).resolve().parent.parent
SHARED_EVAL = REPO.parent / "shared" / "eval"
RESULTS = REPO / "bench" / "results"
_HOUR_S = 3_600.0  # a parse deadline no bench reaches
_UNBOUNDED_BYTES = 10**10  # an unpacked-size bound no bench's file reaches


CHAT_MESSAGES = REPO / "tests" / "data" / "chat_messages.jsonl"
BUNDLED_DOCS_QUESTIONS = REPO / "tests" / "data" / "bundled_docs_questions.json"


def chat_messages() -> list[dict[str, Any]]:
    """The labelled chat messages (`text`, `answer`: a question for the docs, `set`)."""
    lines = CHAT_MESSAGES.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def bundled_docs_labels() -> tuple[int, set[str]]:
    """How many of the chat questions, in file order, were judged against the bundled docs,
    and which of those the docs answer."""
    labels = json.loads(BUNDLED_DOCS_QUESTIONS.read_text(encoding="utf-8"))
    return int(labels["judged"]), set(labels["grounded"])


def bench_settings(data_dir: Path, **env: str) -> Settings:
    return load_settings(
        REPO / "config.yaml", environ={"BOT_STORAGE__DATA_DIR": str(data_dir), **env}
    )


def percentile(values: list[float], pct: int) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[pct - 1]


def write_result(name: str, payload: dict[str, object]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / name
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return path


MetricsPage = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def metric_samples(text: str) -> MetricsPage:
    """Every sample of a Prometheus text page, by name and sorted labels."""
    from prometheus_client.parser import text_string_to_metric_families

    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def metric_sum(page: MetricsPage, name: str, **labels: str) -> float:
    """The sum of `name` over every sample carrying at least these labels."""
    wanted = set(labels.items())
    return sum(v for (n, got), v in page.items() if n == name and wanted <= set(got))


def latency_summary(prefix: str, values_ms: list[float]) -> dict[str, float]:
    return {
        f"{prefix}_p50": round(statistics.median(values_ms), 1),
        f"{prefix}_p99": round(percentile(values_ms, 99), 1),
        f"{prefix}_max": round(max(values_ms), 1),
    }


async def load_bench_main(
    description: str | None,
    name: str,
    one_run: Callable[[Path, int, float], Awaitable[dict[str, Any]]],
    latency_key: str,
) -> None:
    """The command line shared by the chat load benches: N questions at once, R runs, a scripted
    model of S seconds per answer; prints each run and writes the medians to bench/results/."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--model-seconds", type=float, default=2.0)
    args = parser.parse_args()
    runs = []
    for n in range(args.runs):
        with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:
            runs.append(await one_run(Path(tmp), args.questions, args.model_seconds))
        print(f"run {n + 1}: {runs[-1]}")
    result = {
        "questions": args.questions,
        "model_seconds_per_answer": args.model_seconds,
        "runs": runs,
        f"{latency_key}_median": statistics.median(r[latency_key] for r in runs),
        "wall_s_median": statistics.median(r["wall_s"] for r in runs),
        "all_answered": all(r["answered"] == args.questions for r in runs),
    }
    path = write_result(f"{name}-load.json", result)
    print(
        f"{latency_key} {result[f'{latency_key}_median']} ms, wall {result['wall_s_median']} s, "
        f"all answered: {result['all_answered']} -> {path}"
    )


def unbounded_parse_limits() -> ParseLimits:
    """The shipped parse limits with no deadline and no unpacked-size bound: a bench measures
    what a parse costs, not where the limits would stop it."""
    limits = ParseLimits.from_settings(IngestSettings())
    return ParseLimits(
        limits.max_depth, limits.max_attributes, _HOUR_S, limits.threads, _UNBOUNDED_BYTES
    )


def peak_rss_mb() -> float:
    """This process's own high-water mark (VmHWM), in MiB. Not getrusage's ru_maxrss: Linux
    carries into it the RSS of the parent this process was forked from, as it was at exec."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")
