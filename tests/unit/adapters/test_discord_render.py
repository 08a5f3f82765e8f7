from __future__ import annotations

import re

from adapters.discord.render import (
    FIELD_CHARS,
    MESSAGE_EMBED_CHARS,
    MESSAGE_EMBEDS,
    answer_embeds,
    link_markers,
    message_groups,
    sources_text,
    split_text,
)
from core.domain.conversation import Answer, AnswerMode, AnswerStatus, Citation, SourceKind
from core.domain.text import defuse_pings


def _citation(
    n: int, title: str = "Guide", kind: SourceKind = SourceKind.KNOWLEDGE_BASE
) -> Citation:
    return Citation(n, title, f"https://docs.example/{n}#sec", "q", True, kind)


def test_mentions_are_neutralised() -> None:
    text = defuse_pings("@everyone @here <@123> <@!456> <@&789> <#42> <!channel>")
    assert "@everyone" not in text
    assert "@here" not in text
    for raw in ("<@123>", "<@!456>", "<@&789>", "<#42>", "<!channel>"):
        assert raw not in text


def test_markers_link_to_their_source_only() -> None:
    assert link_markers("a [1] b [7]", [_citation(1)]) == (
        "a [[1]](https://docs.example/1#sec) b [7]"
    )


def test_markers_in_code_are_code_not_links() -> None:
    text = "Use argv [1]. Inline `sys.argv[1]` too.\n\n```python\nfirst = sys.argv[1]\n```"
    assert link_markers(text, [_citation(1)]) == (
        "Use argv [[1]](https://docs.example/1#sec). Inline `sys.argv[1]` too.\n\n"
        "```python\nfirst = sys.argv[1]\n```"
    )


def test_embeds_respect_discord_limits() -> None:
    answer = Answer(
        "\n\n".join(["word " * 400] * 6),
        AnswerStatus.PARTIAL,
        AnswerMode.AGENT,
        citations=[_citation(n, "T" * 90) for n in range(1, 11)],
    )
    embeds = answer_embeds(answer, description_chars=4096, max_sources=10)
    assert len(embeds) >= 3
    assert all(len(e.description or "") <= 4096 for e in embeds)
    sources = embeds[-1].fields[0].value or ""
    assert len(sources) <= FIELD_CHARS
    assert sources.count("](https://") == sources.count("\n") + 1  # whole links only
    assert "Partial answer" in (embeds[-1].footer.text or "")
    assert not embeds[0].fields


def test_no_message_of_embeds_is_over_discords_total() -> None:
    """Discord refuses a message whose embeds hold over 6,000 characters in all: a full
    description with ten long sources and ten consulted ones would be one."""
    answer = Answer(
        ("word " * 2000 + "\n\n") * 6,
        AnswerStatus.PARTIAL,
        AnswerMode.AGENT,
        citations=[_citation(n, "T" * 200) for n in range(1, 11)],
        consulted=[_citation(n, "C" * 200) for n in range(11, 21)],
    )
    embeds = answer_embeds(answer, description_chars=4096, max_sources=10)
    assert all(len(e) <= MESSAGE_EMBED_CHARS for e in embeds)
    tail = embeds[-1]
    assert [f.name for f in tail.fields] == ["Sources", "Sources consulted"]
    assert "Partial answer" in (tail.footer.text or "")
    assert not any(e.fields or e.footer.text for e in embeds[:-1])
    groups = message_groups(embeds)
    assert [e for group in groups for e in group] == embeds  # all of them, in order
    assert all(len(g) <= MESSAGE_EMBEDS for g in groups)
    assert all(sum(len(e) for e in g) <= MESSAGE_EMBED_CHARS for g in groups)

    short = answer_embeds(
        Answer("Short [1].", AnswerStatus.ANSWERED, AnswerMode.AGENT, [_citation(1)]),
        description_chars=4096,
        max_sources=10,
    )
    assert len(short) == 1
    assert short[0].fields  # sources stay with a short answer
    assert message_groups(short * 12) == [short * 10, short * 2]


def test_sources_deduplicated_and_marked() -> None:
    text = sources_text(
        [_citation(1, "A"), _citation(1, "A again"), _citation(2, "Web", SourceKind.LEARNED)], 10
    )
    assert "A again" not in text
    assert "(learned from the web)" in text


def test_split_keeps_code_fences_together() -> None:
    code = "```\n" + "\n".join(f"x = {i}" for i in range(50)) + "\n```"
    pieces = split_text(f"{'intro ' * 300}\n\n{code}\n\nend", 2000)
    assert all(len(p) <= 2000 for p in pieces)
    assert any(code in p for p in pieces)  # the fence was not cut


def test_titles_and_urls_cannot_inject_links() -> None:
    evil = Citation(
        1,
        "Docs](https://evil.example/login) click",
        "https://docs.example/x) [pwn](https://evil.example)",
        "q",
        True,
        SourceKind.WEB,
    )
    text = sources_text([evil], 10)
    # No link at all: a URL with a space in it is no web address to link, and the title's
    # own link is unlinked and its brackets escaped.
    assert not re.findall(r"(?<!\\)\]\(", text)
    assert "evil.example" not in text
    odd = Citation(1, "Docs", "https://docs.example/x)[pwn](https://evil.example", "q", True)
    text = sources_text([odd], 10)
    # One link only: the URL's parentheses are encoded, so it can't close the link early.
    assert len(re.findall(r"(?<!\\)\]\(", text)) == 1
    assert "%29" in text


def test_blank_answers_and_oversized_sources_still_render() -> None:
    blank = Answer(" \n ", AnswerStatus.ANSWERED, AnswerMode.AGENT)
    (embed,) = answer_embeds(blank, description_chars=4096, max_sources=10)
    assert "empty" in (embed.description or "")
    huge = Citation(1, "T", "https://docs.example/" + "x" * 2000, "q", True)
    answer = Answer("Fact [1].", AnswerStatus.ANSWERED, AnswerMode.AGENT, citations=[huge])
    (embed,) = answer_embeds(answer, description_chars=4096, max_sources=10)
    assert all(f.value for f in embed.fields)  # no empty field for Discord to refuse


def test_markers_link_to_the_quote_and_sources_to_the_section() -> None:
    quoted = Citation(
        1, "Guide", "https://docs.example/1#sec", "q", True, directive="run%20it%20again"
    )
    assert link_markers("a [1]", [quoted]) == (
        "a [[1]](https://docs.example/1#sec:~:text=run%20it%20again)"
    )
    assert sources_text([quoted], 10) == "[1] [Guide](https://docs.example/1#sec)"
