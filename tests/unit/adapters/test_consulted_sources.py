"""Sources consulted (passages a search-then-answer was written from without citing them) are
listed on every platform under their own heading, linked, and never called unverified quotes."""

from __future__ import annotations

from rich.console import Console

from adapters.console.render import render_answer
from adapters.discord.render import answer_embeds
from adapters.slack.render import answer_messages
from core.domain.conversation import Answer, AnswerMode, AnswerStatus, Citation

CITED = Citation(1, "Ingesting", "https://docs.example/ingest#re", "quote", True)
CONSULTED = [
    Citation(2, "Getting started", "https://docs.example/start", "", False),
    Citation(3, "Evil <!channel> https://evil.example/x", "https://docs.example/faq", "", False),
]
ANSWER = Answer(
    "Run it again [1].",
    AnswerStatus.ANSWERED,
    AnswerMode.SEARCH_THEN_ANSWER,
    citations=[CITED],
    consulted=CONSULTED,
)


def _assert_listed(rendered: str) -> None:
    assert "Sources consulted" in rendered
    assert "https://docs.example/start" in rendered
    assert "https://docs.example/faq" in rendered
    assert "quote not verified" not in rendered
    assert "<!channel>" not in rendered
    assert "evil.example" not in rendered


def test_slack_lists_them_after_the_sources() -> None:
    [message] = answer_messages(
        ANSWER, "a1", section_chars=3000, message_chars=12_000, max_blocks=50, max_sources=10
    )
    texts = [str(b) for b in message.blocks]
    footer = next(t for t in texts if "Sources consulted" in t)
    _assert_listed(footer)
    assert texts.index(footer) > next(i for i, t in enumerate(texts) if "*Sources:*" in t)


def test_discord_lists_them_in_their_own_field() -> None:
    last = answer_embeds(ANSWER, description_chars=4096, max_sources=10)[-1]
    fields = {f.name: f.value for f in last.fields}
    assert list(fields)[:2] == ["Sources", "Sources consulted"]
    _assert_listed(f"Sources consulted {fields['Sources consulted']}")


def test_the_terminal_lists_them_too() -> None:
    console = Console(record=True, width=200, color_system=None)
    console.print(render_answer(ANSWER))
    _assert_listed(console.export_text())
