"""Answers from a local model server against answers with no model, on the same questions.

    .venv/bin/python -m bench.local_model --base-url http://localhost:11434/v1 --model qwen2.5:7b
    .venv/bin/python -m bench.local_model                 # the weak-model stand-in, offline
    .venv/bin/python -m bench.local_model --recorded      # the recorded Qwen 0.5B replies (20)

Runs `bot eval answers --versus-extractive` (the product's own command) R times on the
Anthropic docs QA set and writes the figures of the last run with the medians of the
per-question times over all runs to bench/results/. Without --base-url it serves the stand-in of
the recorded llama-server (`tests/fakes/llama_server.py`) on loopback, so the bench runs offline.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import REPO, SHARED_EVAL, write_result
from tests.fakes.llama_server import LlamaServer, Recorded, weak_model

_RECORDED_QUESTIONS = 20  # of the Anthropic docs QA set, in tests/data/recordings/
_QUALITY = (
    "citation_hit_rate",
    "source_hit_rate",
    "sources_present_rate",
    "uncited_claims_shown",
    "statuses",
    "modes",
)


def one_run(url: str, model: str, limit: int | None, data_dir: Path) -> dict[str, Any]:
    out = data_dir / "figures.json"
    command = [str(Path(sys.executable).parent / "bot"), "eval", "answers"]
    command += ["--dataset", str(SHARED_EVAL / "anthropic_docs_qa"), "--json", str(out)]
    command += ["--base-url", url, "--model", model, "--versus-extractive"]
    command += ["--limit", str(limit)] if limit else []
    env = {**os.environ, "BOT_STORAGE__DATA_DIR": str(data_dir), "BOT_LOGGING__LEVEL": "WARNING"}
    subprocess.run(command, check=True, env=env, cwd=REPO, stdout=subprocess.DEVNULL)
    return dict(json.loads(out.read_text()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base-url", help="an OpenAI-compatible server; default: the stand-in")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--recorded", action="store_true", help="stand-in replays the recording")
    parser.add_argument("--limit", type=int, help="only the first N questions")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    server = None
    # The recording holds the replies to the set's first questions only: a question past them
    # has no reply to replay, and the stand-in would drop the connection.
    limit = args.limit or (_RECORDED_QUESTIONS if args.recorded else None)
    if args.base_url is None:
        server = LlamaServer(Recorded() if args.recorded else weak_model).start()
    url = args.base_url or server.url  # type: ignore[union-attr]
    runs = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-local-") as tmp:
            for number in range(args.runs):
                runs.append(one_run(url, args.model, limit, Path(tmp)))
                model = runs[-1]["model"]
                print(
                    f"run {number + 1}: citation hits {model['citation_hit_rate']} "
                    f"(no model {runs[-1]['extractive']['citation_hit_rate']}), "
                    f"seconds p50 {model['seconds_p50']} p95 {model['seconds_p95']}"
                )
    finally:
        if server is not None:
            server.stop()
    last = runs[-1]
    result = {
        "server": "stand-in (recorded)" if args.recorded else "stand-in (weak model)",
        "model": args.model,
        "runs": args.runs,
        "questions": last["model"]["questions"],
        **{
            name: {key: last[name][key] for key in _QUALITY}
            | {
                f"median_{key}": statistics.median(r[name][key] for r in runs)
                for key in ("seconds_p50", "seconds_p95", "seconds_max")
            }
            for name in ("model", "extractive")
        },
    }
    if args.base_url:
        result["server"] = "given --base-url"
    name = "local-model-recorded.json" if args.recorded else "local-model.json"
    print(f"wrote {write_result(name, result)}")


if __name__ == "__main__":
    main()
