"""Hostile ingest: one folder holding every kind of bad file we know of, plus 50 good ones.

`bot ingest FOLDER --json` runs on it as a subprocess (the real command, as a user runs it) and
must index all 50 good files, skip each bad one with its exact reason, and handle the hostile
files it can index (a 20,000-level HTML page, a 105 KB heading, a 10 MB single line) in bounded
time. Reported: wall time (median of the runs) and peak RSS of the ingest process (the largest
of the runs), from `resource.getrusage(RUSAGE_CHILDREN)`.

    python -m bench.hostile_ingest [--runs 3]

Exits 1 when an expectation fails (a good file not indexed, a reason that differs, peak RSS over
1.5 GB), so CI can run it (`tests/integration/test_hostile_ingest.py` does).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

from bench.common import REPO, write_result
from tests.pdf_maker import make_pdf

GOOD_FILES = 50
PEAK_RSS_LIMIT_MB = 1_536
MAX_FILE_BYTES = 20_000_000  # config.yaml's ingest.max_file_bytes, quoted in a skip reason
HTML_DEPTH = 20_000
HEADING_BYTES = 105_000
LONG_LINE_BYTES = 10_000_000
NUL_OFFSET = 10_000
HTML_ATTRIBUTES = 1_000_000
PDF_BOMB_BYTES = 200_000_000
PDF_NESTING = 5_000
MARKDOWN_NESTING = 100_000

# File name -> the exact skip reason, or None for a hostile file that must be indexed.
Expected = dict[str, str | None]


def pdf_with_content(content: bytes, stream_keys: bytes = b"") -> bytes:
    """A one-page PDF whose content stream is `content`, with extra stream dictionary keys."""
    pdf = make_pdf([["placeholder"]])
    stream = b"<< /Length %d%s >>\nstream\n%s\nendstream" % (len(content), stream_keys, content)
    return re.sub(
        rb"<< /Length \d+ >>\nstream\n.*?\nendstream", lambda _: stream, pdf, count=1, flags=re.S
    )


def build_hostile_folder(root: Path) -> Expected:
    """Writes the good and bad files under `root`; returns what must happen to each bad one."""
    root.mkdir(parents=True, exist_ok=True)
    for n in range(GOOD_FILES):
        (root / f"good{n:02d}.md").write_text(
            f"# Good page {n}\n\n## Topic {n}\n\nThis page explains feature number {n}.\n"
        )
    expected: Expected = {}

    def bad(name: str, reason: str | None) -> Path:
        expected[name] = reason
        return root / name

    bad("loop_a.md", "symlink loop").symlink_to("loop_b.md")
    bad("loop_b.md", "symlink loop").symlink_to("loop_a.md")
    os.mkfifo(bad("pipe.md", "not a regular file (named pipe)"))
    bad("zero.md", "not a regular file (character device)").symlink_to("/dev/zero")
    bad("broken.md", "broken symlink (its target does not exist)").symlink_to("nowhere.md")
    # A file outside the folder (here, this script): ingesting the folder must not publish it.
    bad("outside.md", "symlink to a file outside the folder (not followed)").symlink_to(
        Path(__file__).resolve()
    )
    bad("folder-link", "symlink to a folder (not followed)").symlink_to(root)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(bad("socket.md", "not a regular file (socket)")))
    with bad(
        "huge.txt", f"over the limit of {MAX_FILE_BYTES:,} bytes (ingest.max_file_bytes)"
    ).open("wb") as sparse:
        sparse.truncate(MAX_FILE_BYTES * 50)  # 1 GB that takes no disk
    bad("empty.md", "empty file").write_text("")
    bad(
        "nul.txt", f"binary content (NUL byte at offset {NUL_OFFSET:,}) in a text file"
    ).write_bytes(b"a" * NUL_OFFSET + b"\x00 rest of the text")
    attributes = " ".join(f"a{i}=1" for i in range(HTML_ATTRIBUTES))
    bad(
        "attributes.html",
        f"an element with {HTML_ATTRIBUTES:,} attributes (more than 1,000)",
    ).write_text(f"<html><body><p {attributes}>text</p></body></html>")
    bomb = zlib.compress(b" " * PDF_BOMB_BYTES, 9)
    bad(
        "bomb.pdf", "not a readable PDF: LimitReachedError: Limit reached while decompressing."
    ).write_bytes(pdf_with_content(bomb, b" /Filter /FlateDecode"))
    bad(
        "filter.pdf", "not a readable PDF: NotImplementedError: Unsupported filter /FooDecode"
    ).write_bytes(pdf_with_content(b"abcd", b" /Filter /FooDecode"))
    nested = b"[" * PDF_NESTING + b"]" * PDF_NESTING
    bad(
        "recursion.pdf", "not a readable PDF: RecursionError: maximum recursion depth exceeded"
    ).write_bytes(pdf_with_content(b"BT /F1 12 Tf 72 720 Td " + nested + b" TJ ET"))
    # Hostile but readable: indexed, in bounded time.
    bad("deep.html", None).write_text(
        "<html><body><h1>Deep</h1>" + "<div>level " * HTML_DEPTH + "</body></html>"
    )
    bad("heading.md", None).write_text(
        "# " + "<a " * (HEADING_BYTES // 3) + "\n\nUnder a heading of 105 KB.\n"
    )
    bad("quotes.md", None).write_text("> " * MARKDOWN_NESTING + "deeply quoted\n")
    bad("long-line.txt", None).write_text("x" * LONG_LINE_BYTES)
    (root / os.fsdecode(b"caf\xe9-latin1-name.md")).write_text("# Caf\n\nA name in Latin-1.\n")
    expected["caf\ufffd-latin1-name.md"] = None
    return expected


def run_ingest(folder: Path, data_dir: Path) -> tuple[dict[str, object], float, int, int]:
    """`bot ingest FOLDER --json` in a child process: (report, wall seconds, peak RSS in MB,
    exit code). The child is the only one this process waits for, so RUSAGE_CHILDREN's
    maximum RSS is its own."""
    env = {**os.environ, "BOT_STORAGE__DATA_DIR": str(data_dir), "PYTHONPATH": str(REPO)}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "bot", "ingest", str(folder), "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
    )
    wall = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        sys.exit(f"bot ingest did not print its JSON report:\n{done.stdout}\n{done.stderr}")
    return report, wall, peak_mb, done.returncode


def check(report: dict[str, object], expected: Expected, code: int) -> list[str]:
    """Every way the run differs from what must happen; empty when all is well."""
    problems: list[str] = []
    counts = report["counts"]
    assert isinstance(counts, dict)
    indexed = GOOD_FILES + sum(1 for reason in expected.values() if reason is None)
    if counts["added"] != indexed:
        problems.append(f"{counts['added']} files indexed, expected {indexed}")
    skipped = report["skipped"]
    assert isinstance(skipped, list)
    reasons = {Path(s["display"]).name: s["reason"] for s in skipped}
    for name, reason in expected.items():
        got = reasons.get(name)
        if reason is None and got is not None:
            problems.append(f"{name}: skipped ({got}), expected indexed")
        elif reason is not None and (got is None or not got.startswith(reason)):
            problems.append(f"{name}: {got!r}, expected {reason!r}")
    if code != 0:
        problems.append(f"exit code {code}")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-save", action="store_true", help="Don't write bench/results.")
    args = parser.parse_args()
    walls: list[float] = []
    peak = 0
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as tmp:
        expected = build_hostile_folder(Path(tmp) / "docs")
        for run in range(args.runs):
            report, wall, peak_mb, code = run_ingest(Path(tmp) / "docs", Path(tmp) / f"data{run}")
            walls.append(wall)
            peak = max(peak, peak_mb)
            problems = check(report, expected, code)
            if peak_mb > PEAK_RSS_LIMIT_MB:
                problems.append(f"peak RSS {peak_mb} MB is over {PEAK_RSS_LIMIT_MB} MB")
            if problems:
                sys.exit("hostile ingest failed:\n  " + "\n  ".join(problems))
    result: dict[str, object] = {
        "good_indexed": GOOD_FILES,
        "hostile_indexed": sorted(n for n, r in expected.items() if r is None),
        "skipped": {n: r for n, r in sorted(expected.items()) if r is not None},
        "runs": args.runs,
        "wall_s_median": round(statistics.median(walls), 2),
        "wall_s_all": [round(w, 2) for w in walls],
        "peak_rss_mb_max": peak,
    }
    if not args.no_save:
        write_result("hostile-ingest.json", result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
