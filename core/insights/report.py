"""What the bot could not answer, and what it stood on: the figures of `bot report`, computed
from the answer log.

Knowledge gaps are the questions answered not_found or only in part, and those down-voted,
grouped by meaning (agglomerative clustering over the embedder's vectors, cosine distance,
average linkage), so a team sees "12 people asked about SSO with Okta" rather than 12 rows.
Each gap is named by its most distinctive terms and shown with the passages closest to it: what
the docs say nearby, and so where the missing page belongs. With questions not stored (privacy
mode) gaps are grouped by a sketch of each question's embedding, kept in its place
(`question_sketch`), and shown without examples.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from core.config import InsightSettings
from core.domain.documents import DocumentRecord
from core.domain.insights import NO_MODEL, LoggedAnswer
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


def in_channel(entry: LoggedAnswer, wanted: str) -> bool:
    """`--channel` as a key prefix (`slack/T1/C1`, `discord/123`) or a bare channel id."""
    return (
        entry.channel == wanted
        or entry.channel.startswith(wanted + "/")
        or entry.channel.rsplit("/", 1)[-1] == wanted
    )


async def build_report(
    entries: Sequence[LoggedAnswer],
    *,
    since: float,
    until: float,
    channel: str | None,
    settings: InsightSettings,
    embedder: Embedder,
    index: SearchIndex,
    learned: Sequence[LearnedDocument],
) -> Report:
    chosen = [e for e in entries if channel is None or in_channel(e, channel)]
    posted = [e for e in chosen if e.posted]
    statuses = Counter(e.status for e in chosen)
    quotes = [c for e in posted for c in e.citations if not c.web]
    seconds = sorted(e.total_seconds for e in chosen)
    tokens = [e.input_tokens + e.output_tokens for e in chosen if e.model != NO_MODEL]
    documents = await index.documents()
    report = Report(
        since=_day(since),
        until=_day(until),
        channel=channel,
        answers=len(chosen),
        per_day=dict(sorted(Counter(_day(e.at) for e in chosen).items())),
        per_channel=dict(Counter(e.channel for e in chosen).most_common()),
        statuses={s: statuses.get(s, 0) for s in STATUSES},
        rates={
            **{s: _share(statuses.get(s, 0), len(chosen)) for s in STATUSES},
            "abstained": _share(len(chosen) - len(posted), len(chosen)),
        },
        abstained=len(chosen) - len(posted),
        up_votes=sum(e.up for e in chosen),
        down_votes=sum(e.down for e in chosen),
        reasons=dict(Counter(r for e in chosen for r in e.reasons).most_common()),
        quotes_verified=sum(c.verified for c in quotes),
        quotes=len(quotes),
        latency_p50_s=_percentile(seconds, 50),
        latency_p95_s=_percentile(seconds, 95),
        tokens_per_answer=statistics.fmean(tokens) if tokens else None,
        cost_usd=_cost(chosen, settings),
        models=dict(Counter(e.model for e in chosen).most_common()),
        web_answers=sum(e.web for e in posted),
        questions_stored=any(e.question for e in chosen) or not chosen,
    )
    report.gaps = await knowledge_gaps(chosen, settings, embedder, index)
    _sources(report, posted, documents, settings.report_top)
    report.web_topics = [
        WebTopic(d.question, list(d.keywords), d.uses)
        for d in sorted(learned, key=lambda d: -d.uses)[: settings.report_top]
    ]
    return report


async def knowledge_gaps(
    entries: Sequence[LoggedAnswer],
    settings: InsightSettings,
    embedder: Embedder,
    index: SearchIndex,
) -> list[Gap]:
    """The questions the docs fell short on, grouped by meaning, biggest group first."""
    missed = [e for e in entries if e.status in GAP_STATUSES or e.down > 0]
    if not missed:
        return []
    if all(e.question for e in missed):
        groups = await cluster_questions(
            [e.question for e in missed], embedder, settings.gap_distance
        )
    elif all(e.sketch for e in missed):  # privacy mode: their meaning, not their words
        groups = cluster_vectors([e.sketch for e in missed], settings.gap_distance)
    else:
        groups = _same_question(missed)
    gaps = []
    labels = _labels([[missed[i].question for i in group] for group in groups])
    for group, label in zip(groups, labels, strict=True):
        members = [missed[i] for i in group]
        examples = list(dict.fromkeys(m.question for m in members if m.question))
        closest: list[Passage] = []
        if examples and settings.gap_passages:
            hits = await index.search(examples[0], k=settings.gap_passages)
            closest = [
                Passage(" › ".join(p for p in (h.chunk.title, h.chunk.heading) if p), h.chunk.url)
                for h in hits
            ]
        gaps.append(
            Gap(
                label=label or f"{len(members)} questions (text not stored)",
                size=len(members),
                examples=examples[: settings.gap_examples],
                closest=closest,
                statuses=dict(Counter(m.status for m in members)),
                down_votes=sum(m.down for m in members),
            )
        )
    return sorted(gaps, key=lambda g: (-g.size, g.label))


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


def _same_question(entries: Sequence[LoggedAnswer]) -> list[list[int]]:
    groups: dict[str, list[int]] = {}
    for position, entry in enumerate(entries):
        groups.setdefault(entry.question_hash, []).append(position)
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
    posted: Sequence[LoggedAnswer],
    documents: dict[str, DocumentRecord],
    top: int,
) -> None:
    cited: Counter[str] = Counter()
    down: Counter[str] = Counter()
    seen: dict[str, tuple[str, str]] = {}
    for entry in posted:
        for doc_id in {c.doc_id for c in entry.citations if c.doc_id and not c.web}:
            cited[doc_id] += 1
            down[doc_id] += entry.down
        for c in entry.citations:
            seen.setdefault(c.doc_id, (c.title, c.url))

    def source(doc_id: str) -> CitedSource:
        record = documents.get(doc_id)
        title, url = (record.title, record.url) if record else seen.get(doc_id, ("", ""))
        return CitedSource(doc_id, title, url, cited[doc_id], down[doc_id])

    report.most_cited = [source(d) for d, _ in cited.most_common(top)]
    never = sorted(d for d in documents if d not in cited and not d.startswith(LEARNED_PREFIX))
    report.never_cited = [source(d) for d in never[:top]]
    voted = sorted((d for d in cited if down[d]), key=lambda d: (-down[d], d))
    report.down_voted_sources = [source(d) for d in voted[:top]]


def _cost(entries: Sequence[LoggedAnswer], settings: InsightSettings) -> float | None:
    if settings.input_usd_per_mtok is None or settings.output_usd_per_mtok is None:
        return None
    spent = sum(
        e.input_tokens * settings.input_usd_per_mtok
        + e.output_tokens * settings.output_usd_per_mtok
        for e in entries
    )
    return spent / PER_MTOK


def _percentile(ordered: Sequence[float], percent: int) -> float | None:
    """Nearest rank: a value some answer actually took."""
    if not ordered:
        return None
    return ordered[max(0, math.ceil(percent / 100 * len(ordered)) - 1)]


def _share(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def _day(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d")
