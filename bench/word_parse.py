"""What reading a Word file costs: seconds and peak memory of `parse_word` for a .docx whose
document.xml holds N MB of ordinary paragraphs (the bound `ingest.max_unpacked_bytes` puts on a
hostile file is what this measures against).

Each file is made first, then parsed in child processes of their own, so a peak RSS is that
parse's and nothing else's; figures are medians over the runs. The files are made here
(python-docx's template with the paragraphs written into its XML): nothing is downloaded.

    python -m bench.word_parse [--sizes-mb 5,20,45] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import peak_rss_mb, unbounded_parse_limits, write_result
from core.ingest.word import parse_word
from tests.word_maker import make_docx, rewritten

# One paragraph of about 200 characters of text, as prose paragraphs run.
PARAGRAPH = (
    "<w:p><w:r><w:t>" + "The quick brown fox jumps over the lazy dog. " * 4 + "</w:t></w:r></w:p>"
)
HEADING_EVERY = 20  # paragraphs per section
MB = 1_000_000


def docx_of(megabytes: float) -> bytes:
    """A .docx whose document.xml is about `megabytes` MB: sections of HEADING_EVERY
    paragraphs, each under a Heading 1."""
    heading = '<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>Part</w:t></w:r></w:p>'
    count = int(megabytes * MB) // len(PARAGRAPH)
    body = "".join(
        heading + PARAGRAPH if n % HEADING_EVERY == 0 else PARAGRAPH for n in range(count)
    ).encode()
    return rewritten(
        make_docx([("Normal", "End.")]),
        lambda xml: xml.replace(b"<w:body>", b"<w:body>" + body, 1),
    )


def child(path: Path) -> dict[str, float]:
    """One parse of the file at `path`, measured in this process: seconds, and the peak RSS
    it added to what the process held once the file was read."""
    data = path.read_bytes()
    before = peak_rss_mb()
    started = time.perf_counter()
    doc = parse_word(data, "bench.docx", unbounded_parse_limits())
    seconds = time.perf_counter() - started
    peak = peak_rss_mb()
    return {
        "seconds": round(seconds, 2),
        "added_rss_mb": round(peak - before, 1),
        "sections": len(doc.sections),
    }


def measure(sizes_mb: list[float], runs: int) -> dict[str, dict[str, float]]:
    """Per size, the file made here and parsed by `runs` child processes of their own (the
    file is made before, so its making is in no child's peak)."""
    rows: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for size in sizes_mb:
            path = Path(folder) / f"{size:g}.docx"
            path.write_bytes(docx_of(size))
            passes = []
            for _ in range(runs):
                out = subprocess.run(
                    [sys.executable, "-m", "bench.word_parse", "--child", str(path)],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                passes.append(json.loads(out.strip().splitlines()[-1]))
            row = rows[f"{size:g} MB of XML"] = {
                "file_mb": round(path.stat().st_size / MB, 2),
                "sections": passes[0]["sections"],
                "seconds_median": statistics.median(p["seconds"] for p in passes),
                "added_rss_mb_median": statistics.median(p["added_rss_mb"] for p in passes),
            }
            print(f"{size:g} MB of XML: {row}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes-mb", default="5,20,45")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child)))
        return
    sizes = [float(s) for s in args.sizes_mb.split(",")]
    rows = measure(sizes, args.runs)
    path = write_result("word-parse.json", {"runs": args.runs, "sizes": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
