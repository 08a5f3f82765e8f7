"""`bot report` on a log of any size: the log is folded a page at a time, only the most asked
distinct questions are grouped into gaps (grouping compares every pair), only the biggest gaps
are listed and searched, and what is left out is counted and said."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import numpy as np

from bot.cli.report import is_direct
from core.config import InsightSettings
from core.domain.documents import Progress, Vectors
from core.domain.insights import LoggedAnswer, question_hash
from core.domain.learned import LearnedDocument as Learned
from core.insights.html import render_html
from core.insights.report import Report, build_report
from tests.fakes.answer_log import logged_answer
from tests.fakes.memory import InMemoryIndex, passage

TOPICS = ("sso", "vpn", "refund", "export", "webhook", "oncall")
DAY_S = 86_400
NOW = 1_800_000_000.0


class TopicEmbedder:
    """An `Embedder` placing each question on the axis of its first word's topic: questions
    of one topic are one gap, of two topics never; it remembers every text it embedded."""

    model_id, dimensions = "topics", len(TOPICS)

    def __init__(self) -> None:
        self.embedded: list[str] = []

    async def embed_documents(
        self, texts: Sequence[str], progress: Progress | None = None
    ) -> Vectors:
        self.embedded.extend(texts)
        return np.stack([self._vector(t) for t in texts])

    async def embed_query(self, text: str) -> Vectors:
        return self._vector(text)

    def _vector(self, text: str) -> Vectors:
        vector = np.zeros(self.dimensions, dtype=np.float32)
        vector[TOPICS.index(text.split()[0].rstrip("?"))] = 1
        return vector


def missed(question: str, at: float, n: int) -> LoggedAnswer:
    return logged_answer(
        answer_id=f"a{n}",
        at=at,
        conversation_key=f"slack/T1/C1/{n}",
        question=question,
        question_hash=question_hash(question),
        text="The docs don't say.",
        status="not_found",
        model="claude",
        input_tokens=100,
        output_tokens=10,
        total_seconds=1.0,
        model_seconds=0.5,
    )


def log(asked: dict[str, int]) -> list[LoggedAnswer]:
    """Each question asked that many times, a day apart, the first question first."""
    entries = []
    for question, times in asked.items():
        for _ in range(times):
            entries.append(missed(question, NOW - DAY_S * (100 - len(entries)), len(entries)))
    return entries


async def report(
    entries: Sequence[LoggedAnswer] | AsyncIterator[list[LoggedAnswer]],
    embedder: TopicEmbedder,
    index: InMemoryIndex | None = None,
    **bounds: int,
) -> Report:
    return await build_report(
        entries,
        since=0,
        until=NOW,
        channel=None,
        settings=InsightSettings(**bounds),
        embedder=embedder,
        index=index or InMemoryIndex(),
        learned=[],
    )


async def test_only_the_most_asked_questions_are_grouped_and_the_rest_counted() -> None:
    asked = {
        "sso with okta?": 5,
        "vpn on linux?": 4,
        "refund after a year?": 3,
        "export to csv?": 2,
        "webhook retries?": 1,
    }
    embedder = TopicEmbedder()
    r = await report(log(asked), embedder, gap_max_questions=3)
    assert sorted(embedder.embedded) == sorted(
        ["sso with okta?", "vpn on linux?", "refund after a year?"]
    )
    assert [g.size for g in r.gaps] == [5, 4, 3]
    assert (r.ungrouped_questions, r.ungrouped_asks) == (2, 3)
    assert r.statuses["not_found"] == 15  # the figures still count every answer
    assert r.gaps_left_out() == [
        "2 more distinct questions (3 asked) not grouped: the most asked are grouped first "
        "(insights.gap_max_questions)"
    ]


async def test_among_questions_asked_as_often_the_most_recent_are_grouped() -> None:
    embedder = TopicEmbedder()
    r = await report(
        log({"sso old?": 1, "vpn newer?": 1, "export newest?": 1}), embedder, gap_max_questions=2
    )
    assert sorted(embedder.embedded) == ["export newest?", "vpn newer?"]
    assert r.ungrouped_questions == 1


async def test_a_question_asked_again_is_grouped_once() -> None:
    embedder = TopicEmbedder()
    r = await report(log({"sso with okta?": 40, "sso and saml?": 2}), embedder, gap_max_questions=2)
    assert sorted(embedder.embedded) == ["sso and saml?", "sso with okta?"]
    [gap] = r.gaps
    assert (gap.size, gap.examples) == (42, ["sso with okta?", "sso and saml?"])
    assert r.gaps_left_out() == []


async def test_only_the_biggest_gaps_are_listed_and_searched() -> None:
    asked = {"sso?": 4, "vpn?": 3, "refund?": 2, "export?": 1}
    index = InMemoryIndex([passage("sso", "sso vpn refund export")])
    r = await report(log(asked), TopicEmbedder(), index, gap_max_listed=2)
    assert [g.examples for g in r.gaps] == [["sso?"], ["vpn?"]]
    assert index.queries == ["sso?", "vpn?"]  # one search per listed gap, none for the others
    assert (r.unlisted_gaps, r.unlisted_asks) == (2, 3)
    assert r.gaps_left_out() == [
        "2 smaller gaps (3 questions) not listed (insights.gap_max_listed)"
    ]


async def test_a_log_in_pages_gives_the_figures_of_the_whole() -> None:
    entries = log({"sso?": 3, "vpn?": 2, "refund?": 2})

    async def pages() -> AsyncIterator[list[LoggedAnswer]]:
        for start in range(0, len(entries), 2):
            yield entries[start : start + 2]

    whole = await report(entries, TopicEmbedder())
    paged = await report(pages(), TopicEmbedder())
    assert paged == whole
    assert [g.size for g in paged.gaps] == [3, 2, 2]


async def test_what_the_web_taught_is_the_windows_and_never_in_one_channels_report() -> None:
    """The report listed every learned document, from any time and any channel: a 7-day
    report of one channel showed a question asked in another, private, one 200 days ago."""

    def learned(question: str, days_ago: float, used_days_ago: float | None = None) -> Learned:
        used = None if used_days_ago is None else NOW - DAY_S * used_days_ago
        return Learned(
            f"learned:{question}", question, question, (), NOW - DAY_S * days_ago, used, uses=1
        )

    documents = [learned("old", 200), learned("new", 2), learned("old, used", 200, 1)]

    async def of(channel: str | None) -> Report:
        return await build_report(
            [],
            since=NOW - 7 * DAY_S,
            until=NOW,
            channel=channel,
            settings=InsightSettings(),
            embedder=TopicEmbedder(),
            index=InMemoryIndex(),
            learned=documents,
        )

    assert sorted(t.question for t in (await of(None)).web_topics) == ["new", "old, used"]
    in_channel = await of("slack/T1/CDOCS")
    assert in_channel.web_topics == []
    assert "keeps no channel" in render_html(in_channel)


async def test_a_direct_message_is_never_counted_as_the_channel_its_asker_was_viewing() -> None:
    """Asked in Slack's agent pane while viewing #ops, a DM was logged under #ops (whose
    settings answered it): `bot report --channel` of #ops counted it, its text an example."""
    entries = [
        logged_answer(answer_id="dm", conversation_key="slack/T1/D7/1.1", channel="slack/T1/C9"),
        logged_answer(answer_id="ops", conversation_key="slack/T1/C9/2.2", channel="slack/T1/C9"),
        logged_answer(
            answer_id="thread", conversation_key="discord/thread/5", channel="discord/1/2"
        ),
    ]

    async def of(channel: str | None) -> Report:
        return await build_report(
            entries,
            since=0,
            until=NOW,
            channel=channel,
            settings=InsightSettings(),
            embedder=TopicEmbedder(),
            index=InMemoryIndex(),
            learned=[],
            direct=is_direct,
        )

    assert (await of("C9")).answers == 1
    assert (await of(None)).per_channel == {"slack/T1/D7": 1, "slack/T1/C9": 1, "discord/1/2": 1}
    assert (await of("discord/1/2")).answers == 1  # a thread is its channel's, as logged


def test_each_platforms_direct_messages_are_told_apart() -> None:
    assert is_direct("slack/T1/D7/1.1")
    assert is_direct("discord/dm/42")
    assert not is_direct("slack/T1/C9/1.1")
    assert not is_direct("discord/1/2/3")
    assert not is_direct("discord/thread/5")
    assert not is_direct("slack")
