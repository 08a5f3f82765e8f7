"""How often a citation's link opens its page at the quote, in a real browser (Chromium).

A citation's link carries a text fragment for its verified quote (`core.domain.text_fragments`).
Where the browser can't find the quote as written, Chromium opens the page at its top: it does
not fall back to the `#anchor` in front. So the share of quotes found is what decides whether
the fragments help. Here every sentence of the bundled docs (`docs/*.md`) is cited as grounding
cites it (the document parsed and chunked as ingest does, the sentence given as a claim, the
answer checked as every answer is), and every passage as the extractive answer quotes it.
Each page is the Markdown rendered as CommonMark with tables (as GitHub and most doc sites
render it), below a spacer one screen tall and more: a link that
found its quote scrolls past the spacer, one that did not stays at the top. Headless Chromium
(Debian's package) loads each link once.

    python -m bench.text_fragments [--docs docs] [--limit 0] [--show-missed 10]
"""

from __future__ import annotations

import argparse
import html
import random
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.common import REPO, bench_settings, unbounded_parse_limits, write_result
from core.answer.citations import NumberedSource, SourceRegistry, check_answer
from core.answer.extractive import extractive_answer
from core.answer.grounding import ground, sentences
from core.config import Settings
from core.domain.conversation import Citation
from core.domain.documents import SearchHit
from core.ingest.formats import DocumentFormat, parse_document
from core.ingest.pipeline import build_chunks

SPACER_PX = 3_000  # taller than the window: a page opened at its top shows none of the text
WINDOW = "1000,800"
# Virtual time a page gets to load and scroll before the script reports where it is.
BUDGET_MS = 3_000
REPORT_AFTER_MS = 1_000
CHROMIUM_TIMEOUT_S = 60
_SCROLLED = re.compile(r"SCROLLED=(\d+)")
_REPORTER = f"""<script>
window.addEventListener("load", () => setTimeout(() => {{
  const out = document.createElement("pre");
  out.textContent = "SCROLLED=" + Math.round(window.scrollY);
  document.body.appendChild(out);
}}, {REPORT_AFTER_MS}));
</script>"""


@dataclass(frozen=True, slots=True)
class Cited:
    doc: str
    kind: str  # "grounded" or "extractive"
    quote: str
    link: str


def page_html(body: str, title: str) -> str:
    """A page showing `body` below the spacer, reporting where it was opened."""
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"</head><body><div style='height:{SPACER_PX}px'></div>{body}{_REPORTER}</body></html>"
    )


def scrolled_to(chromium: str, url: str) -> int:
    """How far down headless Chromium opened `url` (pixels)."""
    shown = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--window-size={WINDOW}",
            f"--virtual-time-budget={BUDGET_MS}",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=CHROMIUM_TIMEOUT_S,
        check=True,
    )
    found = _SCROLLED.search(shown.stdout)
    if found is None:
        raise RuntimeError(f"the page did not report where it was opened: {url}")
    return int(found.group(1))


def found_quote(chromium: str, url: str) -> bool:
    """Whether Chromium scrolled to the quote: past the spacer, less half a window."""
    window_height = int(WINDOW.split(",")[1])
    return scrolled_to(chromium, url) > SPACER_PX - window_height


def cited_sentences(
    data: bytes, fmt: DocumentFormat, name: str, page: Path, settings: Settings
) -> list[Cited]:
    """Every sentence of one document cited as grounding cites it, and every passage quoted
    as the extractive answer quotes it, linked to `page`."""
    parsed = parse_document(data, fmt, name, unbounded_parse_limits())
    chunks = build_chunks(
        parsed, doc_id=name, source="docs", url=page.as_uri(), settings=settings.ingest
    )
    answers = settings.answers
    cited: list[Cited] = []
    for chunk in chunks:
        source = [NumberedSource(1, SearchHit(chunk, 1.0))]
        registry = SourceRegistry()
        registry.add([SearchHit(chunk, 1.0)])
        for claim, _ in sentences(chunk.text):
            grounded = ground(claim, source, answers.grounding)
            if grounded.citations:  # else framing, code or a line of markup: nothing cited
                _, citations = check_answer(
                    grounded.text, grounded.citations, registry, decoded=True
                )
                cited += [_cited(name, "grounded", c) for c in citations if c.verified]
        quoted = extractive_answer(
            source, passages=1, quote_chars=answers.quote_chars, reason="Bench."
        )
        cited += [_cited(name, "extractive", c) for c in quoted.citations]
    return cited


def _cited(name: str, kind: str, citation: Citation) -> Cited:
    return Cited(name, kind, citation.quote, citation.link)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=Path, default=REPO / "docs")
    parser.add_argument("--limit", type=int, default=0, help="cite at most this many (0: all)")
    parser.add_argument("--show-missed", type=int, default=10)
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("no chromium: apt-get install chromium")
    from markdown_it import MarkdownIt

    render = MarkdownIt("commonmark").enable("table")
    with tempfile.TemporaryDirectory(prefix="bench-fragments-") as scratch:
        settings = bench_settings(Path(scratch))
        cited: list[Cited] = []
        for markdown in sorted(args.docs.glob("*.md")):
            page = Path(scratch) / f"{markdown.stem}.html"
            text = markdown.read_text(encoding="utf-8")
            page.write_text(page_html(render.render(text), markdown.stem), encoding="utf-8")
            data = markdown.read_bytes()
            cited += cited_sentences(data, DocumentFormat.MARKDOWN, markdown.name, page, settings)
        if args.limit:
            cited = random.Random(0).sample(cited, min(args.limit, len(cited)))
        with_fragment = [c for c in cited if ":~:text=" in c.link]
        missed = [c for c in with_fragment if not found_quote(chromium, c.link)]
    report: dict[str, object] = {
        "docs": str(args.docs.relative_to(REPO) if args.docs.is_relative_to(REPO) else args.docs)
    }
    for kind in ("grounded", "extractive"):
        quotes = [c for c in cited if c.kind == kind]
        linked = [c for c in with_fragment if c.kind == kind]
        found = len(linked) - sum(c.kind == kind for c in missed)
        share = round(found / len(linked), 3) if linked else None
        report[kind] = {
            "quotes": len(quotes),
            "with_fragment": len(linked),
            "found": found,
            "found_share": share,
        }
        print(f"{kind}: {len(quotes)} quotes, {len(linked)} with a text fragment, {found} found")
    report["missed"] = [
        {"doc": c.doc, "kind": c.kind, "quote": c.quote, "link": c.link.rsplit("#", 1)[-1]}
        for c in missed[: args.show_missed]
    ]
    for c in missed[: args.show_missed]:
        print(f"  missed ({c.kind}) in {c.doc}: {c.quote!r}")
    print(f"wrote {write_result('text-fragments.json', report)}")


if __name__ == "__main__":
    main()
