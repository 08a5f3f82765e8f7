"""What the bot could not answer, and what it stood on: the figures of `bot report`, computed
from the answer log.

Knowledge gaps are the questions answered not_found or only in part, and those down-voted,
grouped by meaning (agglomerative clustering over the embedder's vectors, cosine distance,
average linkage), so a team sees "12 people asked about SSO with Okta" rather than 12 rows.
Each gap is named by its most distinctive terms and shown with the passages closest to it: what
the docs say nearby, and so where the missing page belongs. With questions not stored (privacy
mode) gaps are grouped by a sketch of each question's embedding, kept in its place
(`question_sketch`), and shown without examples.

A log of any size: the log is read a page at a time and folded into the figures (a few counters
and eight bytes of latency per answer), each missed question is kept once however often it was
asked, and only the `insights.gap_max_questions` most asked are grouped: the grouping compares
every pair, so its time and memory grow with the square of what it is given. What is left out
is counted and said.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections import Counter
from collections.abc import AsyncIterable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from core.config import InsightSettings
from core.domain.documents import DocumentRecord
from core.domain.insights import NO_MODEL, LoggedAnswer, channel_of, question_hash
from core.domain.learned import LEARNED_PREFIX, LearnedDocument
from core.ports import Embedder, SearchIndex

GAP_STATUSES = frozenset({"not_found", "partial"})
STATUSES = ("answered", "partial", "not_found", "error")
LABEL_TERMS = 3  # terms naming a gap
WORD = r"(?u)\b[a-zA-Z][\w-]+\b"  # a term of a gap's name: starts with a letter
PER_MTOK = 1_000_000
MIN_CLUSTERED = 2  # agglomerative clustering needs two questions


@dataclass(frozen=True, slots=True)
class Passage:
    title: str  # the document's, with the section's heading: "Deploying › Procfile"
    url: str


@dataclass(frozen=True, slots=True)
class Gap:
    label: str
    size: int
    examples: list[str]
    closest: list[Passage]
    statuses: dict[str, int]
    down_votes: int


@dataclass(frozen=True, slots=True)
class CitedSource:
    doc_id: str
    title: str
    url: str
    citations: int
    down_votes: int = 0


@dataclass(frozen=True, slots=True)
class WebTopic:
    question: str
    keywords: list[str]
    uses: int


@dataclass(slots=True)
class Report:
    since: str
    until: str
    channel: str | None
    answers: int
    per_day: dict[str, int]
    per_channel: dict[str, int]
    statuses: dict[str, int]
    rates: dict[str, float]
    abstained: int
    up_votes: int
    down_votes: int
    reasons: dict[str, int]
    quotes_verified: int
    quotes: int
    latency_p50_s: float | None
    latency_p95_s: float | None
    tokens_per_answer: float | None
    cost_usd: float | None
    models: dict[str, int]
    web_answers: int
    gaps: list[Gap] = field(default_factory=list)
    most_cited: list[CitedSource] = field(default_factory=list)
    never_cited: list[CitedSource] = field(default_factory=list)
    down_voted_sources: list[CitedSource] = field(default_factory=list)
    web_topics: list[WebTopic] = field(default_factory=list)
    questions_stored: bool = True
    # Distinct missed questions past `insights.gap_max_questions` (the least asked), and how
    # often they were asked: counted, not grouped.
    ungrouped_questions: int = 0
    ungrouped_asks: int = 0
    # Gaps past `insights.gap_max_listed` (the smallest), and their questions: counted only.
    unlisted_gaps: int = 0
    unlisted_asks: int = 0
    # The channels that asked in the window but that `channel` left out, most asked first (at
    # most `insights.report_top`): what a `--channel` that matched nothing may have meant.
    other_channels: dict[str, int] = field(default_factory=dict)

    def gaps_left_out(self) -> list[str]:
        """What the gaps table does not show, in words (terminal and page alike)."""
        said = []
        if self.unlisted_gaps:
            said.append(
                f"{self.unlisted_gaps:,} smaller gaps ({self.unlisted_asks:,} questions) not "
                "listed (insights.gap_max_listed)"
            )
        if self.ungrouped_questions:
            said.append(
                f"{self.ungrouped_questions:,} more distinct questions "
                f"({self.ungrouped_asks:,} asked) not grouped: the most asked are grouped "
                "first (insights.gap_max_questions)"
            )
        return said

    def unmatched_channel(self) -> str | None:
        """When `--channel` matched no question of the window (a typo, or a quiet channel),
        which channels did ask, in words (terminal and page alike)."""
        if not self.channel or self.answers:
            return None
        asked = ", ".join(f"{name} ({count:,})" for name, count in self.other_channels.items())
        return f"No question in this window came from channel {self.channel}; " + (
            f"the channels that asked: {asked}" if asked else "no channel asked any"
        )


def in_channel(channel: str, wanted: str) -> bool:
    """`--channel` as a key prefix (`slack/T1/C1`, `discord/123`) or a bare channel id."""
    return (
        channel == wanted
        or channel.startswith(wanted + "/")
        or channel.rsplit("/", 1)[-1] == wanted
    )


def never_direct(conversation_key: str) -> bool:  # noqa: ARG001 (the default of `direct`)
    return False


@dataclass(slots=True)
class Missed:
    """One distinct question the docs fell short on, however often it was asked: its text
    (or in privacy mode its hash and sketch), when it was first and last asked, its outcomes."""

    question: str
    question_hash: str
    sketch: array[float]  # float32: what the grouping reads
    first: int  # its place in reading order: examples and groups keep it
    latest_at: float
    asked: int = 0
    down: int = 0
    statuses: Counter[str] = field(default_factory=Counter)


class _Tally:
    """The figures of the chosen entries, one entry at a time."""

    def __init__(
        self, channel: str | None, settings: InsightSettings, direct: Callable[[str], bool]
    ) -> None:
        self.channel = channel
        self.settings = settings
        self.direct = direct
        self.answers = self.posted = self.up = self.down = 0
        self.quotes = self.quotes_verified = self.web_answers = 0
        self.tokens = self.with_tokens = 0
        self.spent = 0.0
        self.days: Counter[str] = Counter()
        self.channels: Counter[str] = Counter()
        self.other_channels: Counter[str] = Counter()
        self.statuses: Counter[str] = Counter()
        self.reasons: Counter[str] = Counter()
        self.models: Counter[str] = Counter()
        self.seconds = array("d")
        self.stored = False
        self.cited: Counter[str] = Counter()
        self.cited_down: Counter[str] = Counter()
        self.seen: dict[str, tuple[str, str]] = {}
        self.missed: dict[str, Missed] = {}

    def add(self, e: LoggedAnswer) -> None:
        # A direct message is the asker's own, whichever channel's settings answered it (the
        # one they were looking at, in Slack's agent pane): never counted as that channel's.
        asked_in = (
            channel_of(e.conversation_key)[1] if self.direct(e.conversation_key) else e.channel
        )
        if self.channel is not None and not in_channel(asked_in, self.channel):
            self.other_channels[asked_in] += 1
            return
        self.answers += 1
        self.days[_day(e.at)] += 1
        self.channels[asked_in] += 1
        self.statuses[e.status] += 1
        self.seconds.append(e.total_seconds)
        if e.model != NO_MODEL:
            self.tokens += e.input_tokens + e.output_tokens
            self.with_tokens += 1
        prices = self.settings.input_usd_per_mtok, self.settings.output_usd_per_mtok
        if prices[0] is not None and prices[1] is not None:
            self.spent += e.input_tokens * prices[0] + e.output_tokens * prices[1]
        self.models[e.model] += 1
        self.up += e.up
        self.down += e.down
        self.reasons.update(e.reasons)
        self.stored = self.stored or bool(e.question)
        if e.posted:
            self._add_posted(e)
        if e.status in GAP_STATUSES or e.down > 0:
            self._add_missed(e)

    def _add_posted(self, e: LoggedAnswer) -> None:
        self.posted += 1
        self.web_answers += e.web
        for c in e.citations:
            if not c.web:
                self.quotes += 1
                self.quotes_verified += c.verified
        for doc_id in {c.doc_id for c in e.citations if c.doc_id and not c.web}:
            self.cited[doc_id] += 1
            self.cited_down[doc_id] += e.down
        for c in e.citations:
            self.seen.setdefault(c.doc_id, (c.title, c.url))

    def _add_missed(self, e: LoggedAnswer) -> None:
        key = e.question or e.question_hash  # its words; in privacy mode, its hash
        missed = self.missed.get(key)
        if missed is None:
            missed = self.missed[key] = Missed(
                e.question,
                e.question_hash or question_hash(e.question),
                array("f", e.sketch),
                len(self.missed),
                e.at,
            )
        missed.asked += 1
        missed.down += e.down
        missed.statuses[e.status] += 1
        missed.latest_at = max(missed.latest_at, e.at)

    def cost(self) -> float | None:
        if self.settings.input_usd_per_mtok is None or self.settings.output_usd_per_mtok is None:
            return None
        return self.spent / PER_MTOK


async def build_report(
    entries: Sequence[LoggedAnswer] | AsyncIterable[Sequence[LoggedAnswer]],
    *,
    since: float,
    until: float,
    channel: str | None,
    settings: InsightSettings,
    embedder: Embedder,
    index: SearchIndex,
    learned: Sequence[LearnedDocument],
    direct: Callable[[str], bool] = never_direct,
) -> Report:
    """`entries`: the log, whole or in pages (`AnswerRecords.answer_log_pages`), folded as
    it comes: a page at a time is all a long window holds in memory. `direct` tells a direct
    message's conversation key (the platforms' own knowledge)."""
    tally = _Tally(channel, settings, direct)
    if isinstance(entries, AsyncIterable):
        async for page in entries:
            for entry in page:
                tally.add(entry)
    else:
        for entry in entries:
            tally.add(entry)
    documents = await index.documents()
    t = tally
    p50, p95 = _percentiles(t.seconds, 50, 95)
    abstained = t.answers - t.posted
    report = Report(
        since=_day(since),
        until=_day(until),
        channel=channel,
        answers=t.answers,
        per_day=dict(sorted(t.days.items())),
        per_channel=dict(t.channels.most_common()),
        statuses={s: t.statuses.get(s, 0) for s in STATUSES},
        rates={
            **{s: _share(t.statuses.get(s, 0), t.answers) for s in STATUSES},
            "abstained": _share(abstained, t.answers),
        },
        abstained=abstained,
        up_votes=t.up,
        down_votes=t.down,
        reasons=dict(t.reasons.most_common()),
        quotes_verified=t.quotes_verified,
        quotes=t.quotes,
        latency_p50_s=p50,
        latency_p95_s=p95,
        tokens_per_answer=t.tokens / t.with_tokens if t.with_tokens else None,
        cost_usd=t.cost(),
        models=dict(t.models.most_common()),
        web_answers=t.web_answers,
        questions_stored=t.stored or not t.answers,
        other_channels=dict(t.other_channels.most_common(settings.report_top)),
    )
    await _knowledge_gaps(report, list(t.missed.values()), settings, embedder, index)
    _sources(report, t, documents, settings.report_top)
    report.web_topics = [
        WebTopic(d.question or d.query, list(d.keywords), d.uses)  # no text kept: the query
        for d in sorted(_learned_in(learned, since, until, channel), key=lambda d: -d.uses)[
            : settings.report_top
        ]
    ]
    return report


def _learned_in(
    learned: Sequence[LearnedDocument], since: float, until: float, channel: str | None
) -> list[LearnedDocument]:
    """What the web taught the bot in the window (learned or used then). None in one channel's
    report: a learned document keeps no channel, and its question may come from any other,
    a private one among them."""
    if channel is not None:
        return []
    return [
        d
        for d in learned
        if since <= d.created_at <= until
        or (d.last_used_at is not None and since <= d.last_used_at <= until)
    ]


async def _knowledge_gaps(
    report: Report,
    missed: Sequence[Missed],
    settings: InsightSettings,
    embedder: Embedder,
    index: SearchIndex,
) -> None:
    """The questions the docs fell short on, grouped by meaning, biggest group first: of
    those, the `gap_max_questions` most asked (then the most recent) are grouped, and the
    `gap_max_listed` biggest groups listed; the rest are counted on `report`."""
    chosen = heapq.nsmallest(
        settings.gap_max_questions, missed, key=lambda m: (-m.asked, -m.latest_at, m.first)
    )
    chosen.sort(key=lambda m: m.first)  # grouped in reading order, as they came
    report.ungrouped_questions = len(missed) - len(chosen)
    report.ungrouped_asks = sum(m.asked for m in missed) - sum(m.asked for m in chosen)
    if not chosen:
        return
    if all(m.question for m in chosen):
        groups = await cluster_questions(
            [m.question for m in chosen], embedder, settings.gap_distance
        )
    elif all(m.sketch for m in chosen):  # privacy mode: their meaning, not their words
        groups = cluster_vectors([m.sketch for m in chosen], settings.gap_distance)
    else:
        groups = _same_question(chosen)
    members_of = [[chosen[i] for i in group] for group in groups]
    # Each question once per time it was asked: how often a word comes up names the gap.
    labels = _labels(
        [[m.question for m in members for _ in range(m.asked)] for members in members_of]
    )
    gaps = [
        Gap(
            label=label or f"{sum(m.asked for m in members)} questions (text not stored)",
            size=sum(m.asked for m in members),
            examples=list(dict.fromkeys(m.question for m in members if m.question)),
            closest=[],
            statuses=_statuses(m.statuses for m in members),
            down_votes=sum(m.down for m in members),
        )
        for members, label in zip(members_of, labels, strict=True)
    ]
    gaps.sort(key=lambda g: (-g.size, g.label))
    listed = gaps[: settings.gap_max_listed]
    report.unlisted_gaps = len(gaps) - len(listed)
    report.unlisted_asks = sum(g.size for g in gaps[len(listed) :])
    report.gaps = [
        replace(
            g,
            examples=g.examples[: settings.gap_examples],
            closest=await _closest(g.examples, index, settings.gap_passages),
        )
        for g in listed
    ]


def _statuses(counts: Iterable[Counter[str]]) -> dict[str, int]:
    """A gap's outcomes in the report's order of statuses (whatever order they came in)."""
    total = sum(counts, Counter())
    return {s: total[s] for s in sorted(total, key=_status_order)}


def _status_order(status: str) -> tuple[int, str]:
    return (STATUSES.index(status) if status in STATUSES else len(STATUSES), status)


async def _closest(examples: Sequence[str], index: SearchIndex, k: int) -> list[Passage]:
    if not examples or not k:
        return []
    hits = await index.search(examples[0], k=k)
    return [
        Passage(" › ".join(p for p in (h.chunk.title, h.chunk.heading) if p), h.chunk.url)
        for h in hits
    ]


async def cluster_questions(
    questions: Sequence[str], embedder: Embedder, distance: float
) -> list[list[int]]:
    """Indices of `questions` grouped by meaning, each group in input order. A question asked
    again is embedded and clustered once: a month's log repeats itself a lot."""
    distinct = list(dict.fromkeys(questions))
    if len(distinct) < MIN_CLUSTERED:
        return [list(range(len(questions)))] if questions else []
    vectors = await embedder.embed_documents(distinct)
    of_distinct = cluster_vectors([v.tolist() for v in vectors], distance)
    label_of = {distinct[i]: label for label, group in enumerate(of_distinct) for i in group}
    groups: dict[int, list[int]] = {}
    for position, question in enumerate(questions):
        groups.setdefault(label_of[question], []).append(position)
    return list(groups.values())


def cluster_vectors(vectors: Sequence[Sequence[float]], distance: float) -> list[list[int]]:
    """Indices grouped by cosine distance (agglomerative, average linkage), in input order."""
    import numpy as np
    from sklearn.cluster import AgglomerativeClustering

    if len(vectors) < MIN_CLUSTERED:
        return [list(range(len(vectors)))] if vectors else []
    labels = (
        AgglomerativeClustering(
            n_clusters=None, metric="cosine", linkage="average", distance_threshold=distance
        )
        .fit(np.asarray(vectors, dtype=np.float32))
        .labels_
    )
    groups: dict[int, list[int]] = {}
    for position, label in enumerate(labels):
        groups.setdefault(int(label), []).append(position)
    return list(groups.values())


def _same_question(missed: Sequence[Missed]) -> list[list[int]]:
    groups: dict[str, list[int]] = {}
    for position, question in enumerate(missed):
        groups.setdefault(question.question_hash, []).append(position)
    return list(groups.values())


def _labels(groups: Sequence[Sequence[str]]) -> list[str]:
    """Each group's most distinctive terms: class-based TF-IDF, every group one document, so
    a word all gaps share ("how", "configure") names none of them."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    texts = [" ".join(g) for g in groups]
    if not any(t.strip() for t in texts):
        return ["" for _ in groups]
    try:
        tfidf = TfidfVectorizer(stop_words="english", token_pattern=WORD)
        weights = tfidf.fit_transform(texts).toarray()
    except ValueError:  # nothing but stop words
        return ["" for _ in groups]
    terms = tfidf.get_feature_names_out()
    return [
        " / ".join(terms[i] for i in row.argsort()[::-1][:LABEL_TERMS] if row[i] > 0)
        for row in weights
    ]


def _sources(
    report: Report,
    tally: _Tally,
    documents: dict[str, DocumentRecord],
    top: int,
) -> None:
    cited, down, seen = tally.cited, tally.cited_down, tally.seen

    def source(doc_id: str) -> CitedSource:
        record = documents.get(doc_id)
        title, url = (record.title, record.url) if record else seen.get(doc_id, ("", ""))
        return CitedSource(doc_id, title, url, cited[doc_id], down[doc_id])

    report.most_cited = [source(d) for d, _ in cited.most_common(top)]
    never = sorted(d for d in documents if d not in cited and not d.startswith(LEARNED_PREFIX))
    report.never_cited = [source(d) for d in never[:top]]
    voted = sorted((d for d in cited if down[d]), key=lambda d: (-down[d], d))
    report.down_voted_sources = [source(d) for d in voted[:top]]


def _percentiles(values: array[float], *percents: int) -> list[float | None]:
    """Nearest rank: a value some answer actually took. Sorted as numpy's 8-byte floats, not
    as a list of Python objects: a long window's latencies stay small."""
    if not values:
        return [None for _ in percents]
    import numpy as np  # at call time: importing it costs a tenth of a second

    ordered = np.sort(np.frombuffer(values, dtype=np.float64))
    return [float(ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]) for p in percents]


def _share(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def _day(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d")
