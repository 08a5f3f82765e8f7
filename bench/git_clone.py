"""What a Git source's first sync downloads and keeps, with `ingest.git.documents_only` on
(a partial clone, `--filter=blob:none`, with a sparse checkout of the supported file types)
and off (every file at the clone's depth).

Each run clones --repo (default: this repository) through `GitConnector.discover`, as a sync
does, into a fresh folder, the two settings taking turns; the remote is served as GitHub's
is, with partial clone allowed (`uploadpack.allowFilter`). Both must find the same documents.
Reported: the clone's size on disk (`.git` and the checkout), the files checked out, and the
seconds of discovery (clone, checkout, listing), medians over --runs.

    python -m bench.git_clone [--repo PATH --label NAME] [--runs 3]

Results: bench/results/git-clone-<label>.json (label: this-repository by default).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common import REPO, bench_settings, write_result
from core.ingest.git import GitConnector

MODES = {"documents only (shipped)": True, "every file": False}


@dataclass(frozen=True)
class Clone:
    seconds: float
    bytes: int  # the clone's folder: .git and the checkout
    git_bytes: int
    files_checked_out: int
    documents: tuple[str, ...]


def size_of(folder: Path) -> tuple[int, int]:
    """Bytes under `folder` and files outside its `.git`."""
    total = checked_out = 0
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            total += path.stat().st_size
            checked_out += ".git" not in path.relative_to(folder).parts
    return total, checked_out


async def clone_once(repo: Path, documents_only: bool, where: Path) -> Clone:
    ingest = bench_settings(where).ingest
    ingest = ingest.model_copy(
        update={"git": ingest.git.model_copy(update={"documents_only": documents_only})}
    )
    connector = GitConnector(
        str(repo),
        ingest,
        checkout=where / "clone",
        include=[],
        exclude=[],
        branch=None,
        web_url=None,
        token=None,
        known=set(),
    )
    started = time.perf_counter()
    found = await connector.discover()
    seconds = time.perf_counter() - started
    on_disk, files = size_of(where / "clone")
    return Clone(
        seconds,
        on_disk,
        size_of(where / "clone" / ".git")[0],
        files,
        tuple(sorted(item.display for item in found.items)),
    )


def measure(repo: Path, runs: int) -> dict[str, dict[str, float]]:
    """Medians per setting, the settings taking turns; SystemExit if they find different
    documents."""
    samples: dict[str, list[Clone]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory() as config:
        # Served as a host with partial clone on. A global config file, since git clears the
        # command line's and GIT_CONFIG_COUNT's settings for a local upload-pack.
        (Path(config) / "gitconfig").write_text("[uploadpack]\n\tallowFilter = true\n")
        before = os.environ.get("GIT_CONFIG_GLOBAL")
        os.environ["GIT_CONFIG_GLOBAL"] = str(Path(config) / "gitconfig")
        try:
            for _ in range(runs):
                for mode, documents_only in MODES.items():
                    with tempfile.TemporaryDirectory() as where:
                        sample = clone_once(repo.resolve(), documents_only, Path(where))
                        samples[mode].append(asyncio.run(sample))
        finally:
            if before is None:
                del os.environ["GIT_CONFIG_GLOBAL"]
            else:
                os.environ["GIT_CONFIG_GLOBAL"] = before
    if len({clones[0].documents for clones in samples.values()}) != 1:
        raise SystemExit("the two settings found different documents")
    return {
        mode: {
            "seconds": statistics.median(c.seconds for c in clones),
            "bytes": statistics.median(c.bytes for c in clones),
            "git_bytes": statistics.median(c.git_bytes for c in clones),
            "files_checked_out": statistics.median(c.files_checked_out for c in clones),
            "documents": len(clones[0].documents),
        }
        for mode, clones in samples.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repo", type=Path, default=REPO)
    parser.add_argument("--label", default="this-repository")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    rows = measure(args.repo, args.runs)
    for mode, row in rows.items():
        print(
            f"{mode:>26}: {row['bytes'] / 1e6:8.1f} MB on disk ({row['git_bytes'] / 1e6:.1f} MB"
            f" .git), {row['files_checked_out']:6.0f} files checked out,"
            f" {row['documents']:.0f} documents, {row['seconds']:.2f} s (median of {args.runs})"
        )
    results = {"repo": str(args.repo), "runs": args.runs, **rows}
    print(f"wrote {write_result(f'git-clone-{args.label}.json', results)}")


if __name__ == "__main__":
    main()
