"""A citation's link opens its page at the quote, in a real browser: Debian's Chromium, headless
(`bench.text_fragments` runs the same check over every sentence of the bundled docs)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from bench.text_fragments import Cited, cited_sentences, found_quote, page_html
from core.config import Settings
from core.ingest.formats import DocumentFormat

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium: `apt-get install chromium` (scripts/test installs it)"
)
REPO = Path(__file__).resolve().parents[2]

HTML_PAGE = """<main><h1>Ingesting</h1>
<h2 id="re-ingesting">Re-ingesting</h2>
<p>Run <code>bot ingest docs/</code> again whenever the <a href="/docs">documentation</a>
changes; nothing else is needed.</p>
<ul><li>Unchanged documents are skipped without being parsed.</li>
<li>Changed documents have <strong>all</strong> their passages replaced in one transaction.</li>
</ul></main>"""


def opened_at_quote(cited: Cited) -> bool:
    assert CHROMIUM is not None
    return found_quote(CHROMIUM, cited.link)


def test_links_to_quotes_of_a_web_page_open_at_the_quote(
    settings: Settings, tmp_path: Path
) -> None:
    page = tmp_path / "ingesting.html"
    page.write_text(page_html(HTML_PAGE, "Ingesting"), encoding="utf-8")
    cited = cited_sentences(HTML_PAGE.encode(), DocumentFormat.HTML, "ingesting", page, settings)
    run_again = (
        "Run bot ingest docs/ again whenever the documentation changes; nothing else is needed."
    )
    assert [c.quote for c in cited if c.kind == "grounded"] == [
        # Its two lines are two claims, each cited to the sentence: the first ("Run bot ingest
        # docs/ again whenever the documentation") says its first clause, which the other
        # clause's "nothing" no longer turns round.
        run_again,
        run_again,
        "Unchanged documents are skipped without being parsed.",
        "Changed documents have all their passages replaced in one transaction.",
    ]
    for quoted in cited:
        assert ":~:text=" in quoted.link
        assert opened_at_quote(quoted), quoted.quote
    # The check can fail: the page's own link, without a fragment, opens at its top.
    assert not opened_at_quote(Cited("ingesting", "grounded", "", page.as_uri()))


def test_links_to_quotes_of_rendered_markdown_open_at_the_quote(
    settings: Settings, tmp_path: Path
) -> None:
    """Markdown as a docs site or GitHub shows it: the quote is the source's text, with code
    marks, emphasis and links' targets the page does not show."""
    source = REPO / "docs" / "ingesting.md"
    page = tmp_path / "ingesting.html"
    rendered = MarkdownIt("commonmark").enable("table").render(source.read_text(encoding="utf-8"))
    page.write_text(page_html(rendered, "Ingesting"), encoding="utf-8")
    cited = cited_sentences(
        source.read_bytes(), DocumentFormat.MARKDOWN, "ingesting.md", page, settings
    )
    linked = [c for c in cited if ":~:text=" in c.link]
    assert len(linked) >= 0.9 * len(cited)  # the rest: quotes across a table's cells
    marked_up = [c for c in linked if "`" in c.quote or "](" in c.quote or "**" in c.quote]
    long_ones = [c for c in linked if len(c.quote.split()) > 2 * 4 and c not in marked_up]
    assert len(marked_up) >= 3
    for quoted in [*marked_up[:3], *long_ones[:2]]:
        assert opened_at_quote(quoted), quoted.quote
