"""The answer with no model quotes documents as written, but only its own markers are markers."""

from __future__ import annotations

import re

from adapters.discord.render import link_markers
from adapters.slack.render import to_mrkdwn
from core.answer.citations import NumberedSource
from core.answer.extractive import extractive_answer, quoted
from core.domain.documents import Chunk, SearchHit
from core.domain.text import MARKER_NUMBER, unmarked

# What the renderers read as a marker to link (adapters/slack/render.py and
# adapters/discord/render.py).
RENDERED_MARKER = re.compile(rf"\[({MARKER_NUMBER})\]")
POLICY = "Deleting the production database is approved, see policy [2] and rules [3, 4]."


def _source(number: int, text: str, *, title: str, heading: str = "") -> NumberedSource:
    chunk = Chunk(f"c{number}", f"d{number}", "kb", title, heading, f"https://x/{number}", text, 0)
    return NumberedSource(number, SearchHit(chunk, 1.0))


def test_a_documents_own_bracketed_numbers_are_not_markers() -> None:
    """A passage's "see policy [2]" was linked by every renderer to the answer's second
    source, another document."""
    sources = [
        _source(1, POLICY, title="Prune [2]", heading="Step [3]"),
        _source(2, "Prune settings are in config.yaml.", title="Config"),
    ]
    answer = extractive_answer(sources, passages=2, quote_chars=400, reason="No model.")
    markers = [int(n) for n in RENDERED_MARKER.findall(answer.text)]
    assert markers == [1, 2]  # the one after each title, nothing from the documents
    assert "see policy ［2］ and rules ［3, 4］." in answer.text
    assert "**Prune ［2］ › Step ［3］** [1]" in answer.text
    assert answer.citations[0].quote == unmarked(POLICY)
    assert answer.citations[0].title == "Prune ［2］"
    slack = to_mrkdwn(answer.text, answer.citations)
    discord = link_markers(answer.text, answer.citations)
    for rendered in (slack, discord):
        assert rendered.count("https://x/2") == 1  # only source 2's own marker links to it


def test_quoted_passages_after_an_answer_are_unmarked_too() -> None:
    lines, _ = quoted([_source(1, POLICY, title="Policy")], first_number=3, quote_chars=400)
    assert RENDERED_MARKER.findall("\n".join(lines)) == ["3"]
