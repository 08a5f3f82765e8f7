"""CPU time of the commands a person runs most: `bot --help` and re-ingesting an unchanged
folder (the bundled docs), as user + system seconds of the whole process.

CPU seconds, not wall time: the machine is shared, and CPU time is what a busy neighbour
changes least. Each run is a fresh process. Give `--repo` more than once to compare checkouts
(for example a `git worktree` of an older commit): their runs are interleaved, so a change in
the machine's load hits every checkout alike.

    python -m bench.cli_startup [--runs 5] [--repo PATH ...]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import REPO, write_result

# Runs the checkout's own CLI (PYTHONPATH puts it first) with this interpreter's packages.
_LAUNCH = "import sys; sys.argv[0] = 'bot'; from bot.cli import main; main()"


def cpu_seconds(repo: Path, args: list[str], data_dir: Path) -> float:
    env = {
        **os.environ,
        "PYTHONPATH": str(repo),
        "BOT_STORAGE__DATA_DIR": str(data_dir),
        "BOT_CONFIG": str(repo / "config.yaml"),
    }
    env.pop("ANTHROPIC_API_KEY", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [sys.executable, "-c", _LAUNCH, *args],
        env=env,
        cwd=repo,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=600,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--repo", type=Path, action="append", help="checkout(s) to measure")
    args = parser.parse_args()
    repos = [r.resolve() for r in (args.repo or [REPO])]
    commands = {"help": ["--help"], "ingest_unchanged": ["ingest", str(REPO / "docs")]}
    samples: dict[str, dict[str, list[float]]] = {
        str(r): {name: [] for name in commands} for r in repos
    }
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        for repo in repos:  # the first ingest fills each checkout's index: not measured
            cpu_seconds(repo, commands["ingest_unchanged"], Path(tmp) / repo.name)
        for _ in range(args.runs):
            for repo in repos:
                for name, command in commands.items():
                    seconds = cpu_seconds(repo, command, Path(tmp) / repo.name)
                    samples[str(repo)][name].append(seconds)
    result: dict[str, object] = {"runs": args.runs, "checkouts": {}}
    for repo, by_command in samples.items():
        medians = {name: round(statistics.median(v), 3) for name, v in by_command.items()}
        result["checkouts"][repo] = {  # type: ignore[index]
            "median_cpu_s": medians,
            "samples_cpu_s": {n: [round(x, 3) for x in v] for n, v in by_command.items()},
        }
        print(f"{repo}: " + ", ".join(f"{n} {s:.2f} s CPU" for n, s in medians.items()))
    print(f"wrote {write_result('cli-startup.json', result)}")


if __name__ == "__main__":
    main()
