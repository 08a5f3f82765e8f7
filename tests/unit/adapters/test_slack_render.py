from __future__ import annotations

from adapters.answer_labels import SOURCE_TITLE_CHARS
from adapters.slack.render import (
    answer_messages,
    escape,
    plain_messages,
    sources_line,
    split_text,
    to_mrkdwn,
)
from core.domain.conversation import Answer, AnswerMode, AnswerStatus, Citation, SourceKind
from tests.fakes.slack_api import TEXT_OBJECT_CHARS, text_objects


def _citation(
    n: int,
    title: str = "Guide",
    kind: SourceKind = SourceKind.KNOWLEDGE_BASE,
    verified: bool = True,
) -> Citation:
    return Citation(n, title, f"https://docs.example/{n}#sec", "q", verified, kind)


def test_mrkdwn_escapes_untrusted_text_and_links_markers() -> None:
    text = (
        "**Bold** & <!channel> <@U1> [docs](https://docs.example/1) [other](https://d.example/a)"
        " see [1] and [9]\n# Title"
    )
    out = to_mrkdwn(text, [_citation(1)])
    assert "*Bold*" in out
    assert "&amp;" in out
    assert "channel" not in out  # pings are removed, not just escaped
    assert "U1" not in out
    assert "<https://docs.example/1|docs>" in out
    assert "d.example" not in out  # not a source: the label stays, the link goes
    assert " other " in out
    assert "<https://docs.example/1#sec|[1]>" in out
    assert "[9]" in out  # no citation 9: left as text, not a link
    assert out.endswith("*Title*")


def test_code_blocks_are_left_alone() -> None:
    out = to_mrkdwn("```\n**not bold** [1]\n```", [_citation(1)])
    assert out == "```\n**not bold** [1]\n```"


def test_markers_in_code_are_code_not_links() -> None:
    text = "Use argv [1]. Inline `sys.argv[1]` too.\n\n```python\nfirst = sys.argv[1]\n```"
    out = to_mrkdwn(text, [_citation(1)])
    assert out == (
        "Use argv <https://docs.example/1#sec|[1]>. Inline `sys.argv[1]` too.\n\n"
        "```python\nfirst = sys.argv[1]\n```"
    )


def test_a_url_with_parentheses_is_linked_whole() -> None:
    url = "https://en.wikipedia.org/wiki/Mercury_(planet)"
    cited = Citation(1, "Mercury", url, "q", True)
    out = to_mrkdwn(f"See [the article]({url}) [1].", [cited])
    assert out == f"See <{url}|the article> <{url}|[1]>."


def test_source_urls_are_made_safe_inside_slack_links() -> None:
    """`&` is written as the entity Slack reads back (percent-encoding it would change the
    query); `|` would start the label early, so it is percent-encoded."""
    url = "https://docs.example/search?q=a&page=2|3"
    cited = Citation(1, "Search", url, "q", True)
    safe = "https://docs.example/search?q=a&amp;page=2%7C3"
    out = to_mrkdwn(f"See [the search]({url}) [1].", [cited])
    assert out == f"See <{safe}|the search> <{safe}|[1]>."
    assert sources_line([cited], 10) == f"*Sources:* <{safe}|[1] Search>"


def test_split_never_breaks_links_or_loses_text() -> None:
    link = "<https://docs.example/page#section|[1]>"
    text = " ".join(f"word{i} {link}" for i in range(300))
    pieces = split_text(text, 1000)
    assert all(len(p) <= 1000 for p in pieces)
    assert all(p.count("<") == p.count(">") for p in pieces)
    assert " ".join(pieces).split() == text.split()


def test_split_keeps_code_fences_balanced() -> None:
    code = "```\n" + "\n".join(f"line {i}" for i in range(400)) + "\n```"
    pieces = split_text(f"Intro.\n\n{code}\n\nOutro.", 1000)
    assert all(p.count("```") % 2 == 0 for p in pieces)
    assert pieces[0].startswith("Intro.")
    assert pieces[-1].endswith("Outro.")


def test_sources_are_deduplicated_capped_and_marked() -> None:
    citations = [
        _citation(1, "A"),
        _citation(1, "A again"),
        _citation(2, "Web thing", SourceKind.LEARNED, verified=False),
    ]
    citations += [_citation(n, f"T{n}") for n in range(3, 20)]
    line = sources_line(citations, 10)
    assert line.count("<https://") == 10
    assert "A again" not in line
    assert "(learned from the web)" in line
    assert "quote not verified" in line
    assert escape("<x>") == "&lt;x&gt;"


def test_answer_messages_respect_limits_and_footer() -> None:
    answer = Answer(
        "\n\n".join(["para " * 100] * 60),
        AnswerStatus.PARTIAL,
        AnswerMode.AGENT,
        citations=[_citation(1)],
    )
    messages = answer_messages(
        answer, "id1", section_chars=3000, message_chars=12000, max_blocks=50, max_sources=10
    )
    assert len(messages) >= 3
    for message in messages:
        assert len(message.blocks) <= 50
        assert len(message.text) <= 12_002  # sections joined by a blank line
    footer = [b["type"] for b in messages[-1].blocks[-3:]]
    assert footer == ["context", "context", "actions"]
    assert "Partial answer" in str(messages[-1].blocks[-3])


def test_errors_get_no_feedback_buttons() -> None:
    answer = Answer("Sorry.", AnswerStatus.ERROR, AnswerMode.AGENT)
    (message,) = answer_messages(
        answer, "id1", section_chars=3000, message_chars=12000, max_blocks=50, max_sources=10
    )
    assert all(b["type"] != "actions" for b in message.blocks)


def test_answers_from_the_web_say_so() -> None:
    answer = Answer(
        "Fact [1].",
        AnswerStatus.ANSWERED,
        AnswerMode.AGENT,
        citations=[_citation(1, "Learned", SourceKind.LEARNED)],
    )
    (message,) = answer_messages(
        answer, "id1", section_chars=3000, message_chars=12000, max_blocks=50, max_sources=10
    )
    assert "found on the web" in str(message.blocks)
    plain = Answer("Fact [1].", AnswerStatus.ANSWERED, AnswerMode.AGENT, citations=[_citation(1)])
    (message,) = answer_messages(
        plain, "id1", section_chars=3000, message_chars=12000, max_blocks=50, max_sources=10
    )
    assert "found on the web" not in str(message.blocks)


def test_mrkdwn_is_verbatim_and_titles_cannot_ping() -> None:
    answer = Answer(
        "Fact [1].",
        AnswerStatus.ANSWERED,
        AnswerMode.AGENT,
        citations=[_citation(1, "@channel <!here> release notes")],
    )
    (message,) = answer_messages(
        answer, "id1", section_chars=3000, message_chars=12000, max_blocks=50, max_sources=10
    )
    texts = [b["text"] for b in message.blocks if b["type"] == "section"]
    texts += [e for b in message.blocks if b["type"] == "context" for e in b["elements"]]
    assert texts
    assert all(t["verbatim"] is True for t in texts)
    rendered = str(message.blocks)
    assert "<!here>" not in rendered
    assert "@channel" not in rendered


def test_plain_fallback_keeps_labels_and_is_never_empty() -> None:
    from adapters.slack.render import plain_messages

    partial = Answer(
        "Half of it [1].", AnswerStatus.PARTIAL, AnswerMode.AGENT, citations=[_citation(1)]
    )
    (text,) = plain_messages(partial, 3900)
    assert text.startswith(":warning: Partial answer")
    assert plain_messages(Answer("", AnswerStatus.ANSWERED, AnswerMode.AGENT), 3900)


def long_sources_answer(n_sources: int = 10) -> Answer:
    """The auditor's case: ten citations with ~110-character titles and ~150-character URLs
    made a sources line of 3,066 characters, which Slack refuses (invalid_blocks)."""
    citations = [
        Citation(
            n,
            "Platform handbook: rolling back a failed database migration without downtime, "
            f"part {n} of the incident response guide",
            "https://handbook.example.com/engineering/platform/deployments/production-rollbacks"
            f"-and-incident-response-{n}.html#rolling-back-a-failed-database-migration-without"
            "-downtime",
            "q",
            n % 2 == 0,
        )
        for n in range(1, n_sources + 1)
    ]
    text = " ".join(f"Step {n} is described here [{n}]." for n in range(1, n_sources + 1))
    return Answer(text, AnswerStatus.ANSWERED, AnswerMode.AGENT, citations, consulted=citations)


def test_long_sources_stay_within_slacks_text_limit_and_whole() -> None:
    (message,) = answer_messages(
        long_sources_answer(), "a1", section_chars=3000, message_chars=12000, max_blocks=50,
        max_sources=10,
    )  # fmt: skip
    texts = [t["text"] for t in text_objects(message.blocks)]
    assert all(len(t) <= TEXT_OBJECT_CHARS for t in texts)
    footer = [t for t in texts if "handbook.example.com" in t]
    listed = " ".join(footer)
    for n in range(1, 11):  # every source linked, no link cut
        assert f"-{n}.html#rolling-back-a-failed-database-migration-without-downtime|[{n}] " in (
            listed
        )
    assert all(t.count("<") == t.count(">") for t in footer)
    assert "feedback_up" in str(message.blocks[-1])  # the feedback buttons stay


def test_titles_are_clipped_and_an_overlong_url_is_listed_unlinked() -> None:
    title = "word " * 100
    huge = Citation(1, title, "https://docs.example/" + "x" * TEXT_OBJECT_CHARS, "q", True)
    (message,) = answer_messages(
        Answer("Fact [1].", AnswerStatus.ANSWERED, AnswerMode.AGENT, [huge]), "a1",
        section_chars=3000, message_chars=12000, max_blocks=50, max_sources=10,
    )  # fmt: skip
    texts = [t["text"] for t in text_objects(message.blocks)]
    assert all(len(t) <= TEXT_OBJECT_CHARS for t in texts)
    sources = next(t for t in texts if t.startswith("*Sources:*"))
    assert "[1] word word" in sources
    assert len(sources) <= len("*Sources:* [1] ") + SOURCE_TITLE_CHARS


def test_plain_fallback_lists_sources_consulted_too() -> None:
    plain = "\n".join(plain_messages(long_sources_answer(2), 3900))
    _, consulted = plain.split("*Sources consulted:*")
    assert "-2.html#rolling-back-a-failed-database-migration-without-downtime|[2] " in consulted


def test_markers_link_to_the_quote_and_sources_to_the_section() -> None:
    """A marker opens the page at its quote (a text fragment); the source listed under the
    answer keeps the section's link, which opens where it did if the fragment misses."""
    quoted = Citation(
        1, "Guide", "https://docs.example/1#sec", "q", True, directive="run%20it%20again"
    )
    answer = Answer("It says so [1].", AnswerStatus.ANSWERED, AnswerMode.AGENT, [quoted])
    [message] = answer_messages(
        answer, "a1", section_chars=3000, message_chars=12000, max_blocks=50, max_sources=10
    )
    shown = "\n".join(t["text"] for t in text_objects(message.blocks))
    assert "<https://docs.example/1#sec:~:text=run%20it%20again|[1]>" in shown
    assert "<https://docs.example/1#sec|[1] Guide>" in shown
