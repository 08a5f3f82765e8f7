from __future__ import annotations

import pytest

from core.answer.citations import SourceRegistry, check_answer, normalise
from core.answer.tools import CitedSource
from core.domain.conversation import SourceKind
from core.domain.documents import Chunk, SearchHit
from core.domain.text import defuse_pings
from core.domain.urls import is_linkable


def _registry(*texts: str, learned: tuple[int, ...] = ()) -> SourceRegistry:
    registry = SourceRegistry()
    registry.add(
        [
            SearchHit(
                Chunk(
                    f"c{i}",
                    f"d{i}",
                    "s",
                    f"Doc {i}",
                    "",
                    f"https://docs.example/{i}#part",
                    text,
                    0,
                    learned=i in learned,
                ),
                1.0,
            )
            for i, text in enumerate(texts, start=1)
        ]
    )
    return registry


def test_markers_renumbered_in_reading_order_and_unknown_ones_dropped() -> None:
    registry = _registry("alpha text", "beta text", "gamma text")
    text, citations = check_answer(
        "Gamma first [3], then alpha [1], unknown [9], both [3, 1].", [], registry
    )
    assert text == "Gamma first [1], then alpha [2], unknown, both [1][2]."
    assert [(c.number, c.title) for c in citations] == [(1, "Doc 3"), (2, "Doc 1")]


def test_quotes_are_verified_loosely_but_honestly() -> None:
    registry = _registry("The  Rate limit is\n50 requests per minute & more.")
    _, good = check_answer(
        "x [1]", [CitedSource(source=1, quote="rate LIMIT is 50 requests")], registry
    )
    assert good[0].verified
    _, escaped = check_answer(
        "x [1]", [CitedSource(source=1, quote="per minute &amp; more")], registry
    )
    assert escaped[0].verified  # the model saw the passage HTML-escaped
    _, bad = check_answer(
        "x [1]", [CitedSource(source=1, quote="100 requests per minute")], registry
    )
    assert not bad[0].verified
    _, empty = check_answer("x [1]", [CitedSource(source=1, quote="  ")], registry)
    assert not empty[0].verified


@pytest.mark.parametrize(
    "quote",
    [
        "e",  # a letter is in almost any passage
        "that",  # so is a stop word
        "keywords",  # one content word shows nothing
        "rune removes learned",  # not on a word boundary: part of "Prune"
        "learned keyword",  # ... nor here: part of "keywords"
    ],
)
def test_a_quote_that_says_too_little_verifies_nothing(quote: str) -> None:
    registry = _registry("Prune removes learned keywords that nobody used for ninety days.")
    _, citations = check_answer("x [1]", [CitedSource(source=1, quote=quote)], registry)
    assert not citations[0].verified


@pytest.mark.parametrize(
    "quote",
    [
        "removes learned keywords",
        "Restart it.",  # a short sentence quoted whole, as grounding quotes it
        "Restart it",
        "Then: done",  # a short line quoted whole
        "x = 1",  # a line of code
    ],
)
def test_a_quote_with_content_or_a_whole_short_sentence_verifies(quote: str) -> None:
    registry = _registry(
        "Prune removes learned keywords. Restart it. Check the log.\n"
        "- Then: done\n\n```\nx = 1\n```"
    )
    _, citations = check_answer("x [1]", [CitedSource(source=1, quote=quote)], registry)
    assert citations[0].verified


def test_brackets_in_code_are_code_not_markers() -> None:
    """`sys.argv[1]` in a code block or span is an index: renumbering it made `sys.argv[0]`
    `sys.argv`, `sys.argv[1]` a citation of another source, and `[8080, 8443]` nothing."""
    registry = _registry("alpha text", "beta text")
    answer = (
        "Read it like this [2], with `argv[1]`:\n\n```python\nimport sys\n"
        "name = sys.argv[0]\nfirst = sys.argv[1]\nports = [8080, 8443]\n```\nDone [1]."
    )
    text, citations = check_answer(answer, [], registry)
    assert text == answer.replace("[2],", "[1],").replace("Done [1]", "Done [2]")
    assert [c.title for c in citations] == ["Doc 2", "Doc 1"]


def test_a_fence_never_closed_is_read_as_text_as_the_platforms_show_it() -> None:
    """Slack and Discord show the lines of an unclosed fence as text: read as code here, its
    markers kept the model's numbers, which then pointed at other sources or at none."""
    registry = _registry("alpha text", "beta text")
    text, citations = check_answer("See [2]:\n```\nThen run it [1]. Bogus [9].\n", [], registry)
    assert text == "See [1]:\n```\nThen run it [2]. Bogus."
    assert [c.title for c in citations] == ["Doc 2", "Doc 1"]


def test_a_fence_closes_at_the_next_fence_wherever_it_stands() -> None:
    registry = _registry("alpha text", "beta text", "gamma text")
    answer = "Install first [3].\n```\nnpm ci```\nThen run it [1]. Bogus [9]."
    text, citations = check_answer(answer, [], registry)
    assert text == "Install first [1].\n```\nnpm ci```\nThen run it [2]. Bogus."
    assert [c.title for c in citations] == ["Doc 3", "Doc 1"]


def test_cited_but_unmarked_sources_are_kept_after_marked_ones() -> None:
    registry = _registry("one", "two")
    text, citations = check_answer("Only [2].", [CitedSource(source=1, quote="one")], registry)
    assert text == "Only [1]."
    assert [c.title for c in citations] == ["Doc 2", "Doc 1"]


def test_only_urls_of_retrieved_passages_survive() -> None:
    registry = _registry("text")
    text, _ = check_answer(
        "See [docs](https://docs.example/1#part), [page](https://docs.example/1), "
        "[evil](https://evil.example/x) and https://evil.example/y. Also https://docs.example/1.",
        [],
        registry,
    )
    assert "https://docs.example/1#part" in text
    assert "(https://docs.example/1)" in text
    assert "evil.example" not in text
    assert "(link removed)." in text
    assert text.endswith("Also https://docs.example/1.")


def test_learned_sources_are_marked() -> None:
    registry = _registry("web fact", learned=(1,))
    _, citations = check_answer("Fact [1].", [], registry)
    assert citations[0].source_kind is SourceKind.LEARNED


def test_pings_are_defused() -> None:
    assert defuse_pings("hi <!channel> <!here|here> <@U024BE7LH> <!subteam^S1|eng> <@!123>") == (
        "hi     "
    )
    assert "@everyone" not in defuse_pings("ping @everyone and @here now")
    assert defuse_pings("email me at a@b.com") == "email me at a@b.com"


def test_normalise_folds_typography() -> None:
    assert normalise("It’s  “quoted”\n") == normalise('it\'s "QUOTED"')


def test_unfinished_links_are_held_back_while_streaming() -> None:
    from core.answer.citations import finished_part

    assert finished_part("See [the guide](https://evil.example/ph") == "See "
    assert finished_part("See [the gu") == "See "
    assert finished_part("Done [1") == "Done "
    assert finished_part("Visit https://evil.exa") == "Visit "
    assert finished_part("Ping <!chan") == "Ping "
    assert finished_part("All complete [1].") == "All complete [1]."


def test_every_link_form_is_judged() -> None:
    registry = _registry("text")
    for evil in [
        "(https://evil.com/x)",
        "<https://evil.com|docs>",
        "<https://evil.com>",
        "[x](https://evil.com 'title')",
        '[x](https://evil.com "title")',
        "[x](HTTPS://evil.com)",
        "[x](<https://evil.com>)",
        "HTTPS://EVIL.COM/path",
    ]:
        text, _ = check_answer(f"See {evil} now.", [], registry)
        assert "evil.com" not in text.lower(), (evil, text)
    kept, _ = check_answer("<https://docs.example/1#part|the docs>", [], registry)
    assert kept == "<https://docs.example/1#part|the docs>"


@pytest.mark.parametrize("glue", ["'", '"', ")", "]", "|", "`", ":x"])
def test_a_source_origin_with_a_user_part_glued_on_is_not_its_link(glue: str) -> None:
    """`https://docs.example.com'@evil.example` opens evil.example: what stands before the `@`
    is a user name. With a bare origin as a source (a web result's, often), the allowed prefix
    used to be kept and `@evil.example` left as an e-mail address, so clients linked the run."""
    from core.answer.citations import check_links

    origin = {"https://docs.example.com"}
    checked = check_links(f"Portal: https://docs.example.com{glue}@evil.example.", origin)
    assert "evil.example" not in checked
    plain = "Mail help@docs.example.com or see https://docs.example.com."
    assert check_links(plain, origin) == plain


def test_nested_and_labelled_pings_are_defused() -> None:
    assert "<!channel>" not in defuse_pings("<<!here>!channel>")
    assert defuse_pings("hi <@U123|bob>") == "hi "
    assert "<!here>" not in defuse_pings("<!<!everyone>here>")


@pytest.mark.parametrize(
    ("url", "linked"),
    [
        ("https://docs.example.com/guide#setup", True),
        ("file:///srv/docs/ingesting.md#re-ingesting", True),  # a local ingest's own link
        ("file://evil.example/share/x.md", False),  # a file URL naming a host
        ("file:////evil.example/share/x.md", False),  # ... as a UNC path, opened over SMB
        ("file:relative/x.md", False),
        ("javascript:alert(1)", False),
        ("https://docs.example.com@evil.example/", False),
        ("https://evil.example/a<!channel>b&x=<@U024BE7LH>", False),  # a web result's trick
        ("https://evil.example/a>b", False),
        ('https://evil.example/a"onclick="x', False),
        ("https://docs.example.com/search?q=a&page=2|3", True),  # odd, but a real address
    ],
)
def test_which_source_urls_may_be_linked(url: str, linked: bool) -> None:
    assert is_linkable(url) is linked


def test_a_verified_quote_links_to_itself_as_the_passage_has_it() -> None:
    """The quote shown has its link removed (not a source), but the page shows the URL: the
    text fragment is made from the quote as the passage holds it, or it would never match (and
    Chromium opens a page whose fragment does not match at its top)."""
    registry = _registry("Point the bot at https://llm.internal/v1 and restart it.")
    quote = "Point the bot at https://llm.internal/v1 and restart it."
    _, [cited] = check_answer("Point it there [1].", [CitedSource(source=1, quote=quote)], registry)
    assert cited.verified
    assert "llm.internal" not in cited.quote  # shown without the link
    assert cited.link == (
        "https://docs.example/1#part:~:text="
        "Point%20the%20bot%20at%20https%3A%2F%2Fllm.internal%2Fv1%20and%20restart%20it."
    )


def test_an_unverified_quote_gets_no_text_fragment() -> None:
    registry = _registry("Restart the bot after upgrading.")
    quote = "Restart the bot before upgrading."
    _, [cited] = check_answer("Restart it [1].", [CitedSource(source=1, quote=quote)], registry)
    assert not cited.verified
    assert cited.link == cited.url == "https://docs.example/1#part"
