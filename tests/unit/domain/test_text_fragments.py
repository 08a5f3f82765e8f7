"""A citation's link opens its page at the verified quote (a URL text fragment)."""

from __future__ import annotations

from urllib.parse import unquote

import pytest

from core.domain.conversation import Citation
from core.domain.text_fragments import (
    FRAGMENT_DIRECTIVE,
    MAX_DIRECTIVE_CHARS,
    highlighting,
    text_directive,
)

PAGE = "https://docs.example.com/ingesting#re-ingesting"
PASSAGE = """Run the same command again whenever the documentation changes.

- unchanged documents are skipped without being parsed;
- changed documents have all their passages replaced in one transaction;
- with `--prune`, documents that no longer exist are deleted.

Steps:
1. Set `BOT_<SECTION>__<KEY>` to override a **key**, as [the guide](https://x/guide) says
in its first part.
2. Run `bot remove SOURCE|URL|PATH` to drop one; Markdown's `![alt](...)` is read too.

| setting | default |
|---|---|
| max_pages | 500 |

```python
run(**kwargs) # with every option
```

All docs/*.md are read, and __init__.py is read first; see ![the diagram](d.png) below, and
see [the guide][guide] below. We prune &amp; sync every night. Press <kbd>Ctrl</kbd> and C.
"""


def terms(quote: str, passage: str = PASSAGE) -> list[str]:
    """The directive's terms, decoded (`start`, or `start` and `end`)."""
    directive = text_directive(quote, passage)
    assert directive, f"no directive for {quote!r}"
    return [unquote(term) for term in directive.split(",")]


def test_a_short_quote_is_matched_whole() -> None:
    assert terms("unchanged documents are skipped without being parsed;") == [
        "unchanged documents are skipped without being parsed;"
    ]


def test_a_long_quote_is_matched_by_its_first_and_last_words() -> None:
    assert terms("Run the same command again whenever the documentation changes.") == [
        "Run the same command",
        "whenever the documentation changes.",
    ]


def test_each_term_stays_within_a_line_of_the_passage() -> None:
    """A term never matches across two blocks of a page (checked in Chromium): a quote over
    two list items, or a label and the list under it, is matched by each end's own line."""
    assert terms("skipped without being parsed; - changed documents have all") == [
        "skipped without being parsed;",
        "changed documents have all",
    ]
    # A run shorter than MIN_TERM_WORDS is no term: "Steps:" could match anywhere.
    assert terms("Steps: 1. Set `BOT_<SECTION>__<KEY>` to override") == [
        "Set BOT_<SECTION>__<KEY> to override"
    ]
    assert text_directive("Steps: 1. Set", PASSAGE) == ""


def test_the_characters_that_part_a_directive_are_encoded_in_its_terms() -> None:
    """`-` marks a prefix or suffix and `,` separates start from end: left as they are,
    "re-ingest, then prune" would be read as other parts."""
    said = "re-ingest, then prune, then sync"
    directive = text_directive(said, f"We {said}.")
    assert not {"-", ","} & set(directive)
    assert [unquote(term) for term in directive.split(",")] == [said]


@pytest.mark.parametrize(
    ("quote", "shown"),
    [
        ("with `--prune`, documents", "with --prune, documents"),
        ("as [the guide](https://x/guide) says", "as the guide says"),
        # Code spans as written: Chromium missed these before (`bench.text_fragments`).
        ("Set `BOT_<SECTION>__<KEY>` to override", "Set BOT_<SECTION>__<KEY> to override"),
        ("Markdown's `![alt](...)` is read too.", "Markdown's ![alt](...) is read too."),
        ("Run `bot remove SOURCE|URL|PATH` to drop", "Run bot remove SOURCE|URL|PATH to drop"),
        ("run(**kwargs) # with every option", "run(**kwargs) # with every option"),  # fenced
    ],
)
def test_markup_a_page_does_not_show_is_left_out(quote: str, shown: str) -> None:
    assert terms(quote)[0] == shown


@pytest.mark.parametrize(
    "quote",
    [
        "| max_pages | 500 |",  # a table's row
        # What a page may show otherwise: emphasis or a literal `*` (Markdown and HTML read
        # them apart), an image, a reference link, an entity, inline HTML.
        "override a **key**, as",
        "docs/*.md are read",
        "__init__.py is read first",
        "see ![the diagram](d.png) below",
        "see [the guide][guide] below",
        "prune &amp; sync every night",
        "press <kbd>Ctrl</kbd> and C",
        "the documentation changes. Not in the passage.",  # not where it could be placed
        "   ",
    ],
)
def test_no_directive_for_a_quote_a_page_does_not_show_in_one_place(quote: str) -> None:
    assert text_directive(quote, PASSAGE) == ""


@pytest.mark.parametrize(
    "url",
    [
        "https://docs.example.com/manual.pdf#page=3",
        "https://docs.example.com/deck.pptx",
        "javascript:alert(1)",
        PAGE + ":~:text=already",
    ],
)
def test_no_fragment_where_it_means_something_else(url: str) -> None:
    assert highlighting(url, "Restart%20it.") == url


def test_the_fragment_follows_the_heading_anchor_or_makes_one() -> None:
    assert highlighting(PAGE, "Restart%20it.") == f"{PAGE}{FRAGMENT_DIRECTIVE}Restart%20it."
    assert highlighting("https://docs.example.com/a", "Restart%20it.") == (
        "https://docs.example.com/a#:~:text=Restart%20it."
    )
    assert highlighting(PAGE, "") == PAGE


def test_a_citation_links_to_its_quote_and_is_told_apart_by_its_passage() -> None:
    directive = text_directive("unchanged documents are skipped", PASSAGE)
    cited = Citation(
        1, "Ingesting", PAGE, "unchanged documents are skipped", True, directive=directive
    )
    assert cited.link == f"{PAGE}{FRAGMENT_DIRECTIVE}unchanged%20documents%20are%20skipped"
    assert cited.url == PAGE


def test_a_code_blocks_line_keeps_its_spacing() -> None:
    """A `<pre>` shows the spaces as written, and Chromium matches a term there only with them
    (it missed this line of the getting-started guide with the spaces collapsed)."""
    passage = "```\nexport KEY=...     # optional\nbot ask\n```"
    assert terms("export KEY=... # optional", passage) == ["export KEY=...     # optional"]


def test_a_directive_too_long_for_a_link_is_left_out() -> None:
    """A link too long for a Slack text object is shown unlinked: a passage's 5,000-character
    "word" must not cost the citation its link."""
    huge = "x" * 5_000
    assert text_directive(f"See {huge} now.", f"Read this. See {huge} now.") == ""
    assert len(text_directive("Read this.", f"Read this. See {huge} now.")) <= MAX_DIRECTIVE_CHARS
