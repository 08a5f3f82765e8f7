"""Helpers shared by the benchmark scripts: settings in a scratch dir, stats, result files."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from core.config import Settings, load_settings

REPO = Path(__file__).resolve().parent.parent
SHARED_EVAL = REPO.parent / "shared" / "eval"
RESULTS = REPO / "bench" / "results"


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
