"""`bot report` on a seeded answer log over the bundled docs: the figures add up, knowledge gaps
group known paraphrases together, and the HTML page renders in a real headless Chromium with
no console errors."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest
from PIL import Image
from sklearn.metrics import adjusted_rand_score
from typer.testing import CliRunner

from bot.cli import app
from core.backends.sqlite import SqliteBackend
from core.config import Settings
from core.domain.insights import question_sketch
from core.insights.html import render_html
from core.insights.report import (
    Gap,
    Passage,
    Report,
    build_report,
    cluster_questions,
    cluster_vectors,
)
from core.search.embedder import MiniLMEmbedder
from tests.fakes.answer_log import gap_questions, over_kb, seed_log
from tests.integration.answers.helpers import cached

SEEDED = 600
DAY_S = 86_400
# A distinctive word of each seeded gap topic: its gap's name should carry one.
TOPIC_WORDS = {
    "sso": {"sso", "saml", "sign"},
    "password": {"password", "passwords", "reset"},
    "refund": {"refund", "refunds"},
    "ratelimit": {"rate", "limit", "429", "throttled", "quota"},
    "export": {"export", "csv"},
    "webhook": {"webhook", "webhooks"},
    "vpn": {"vpn"},
    "onboarding": {"onboarding", "new", "hire", "hires", "joiner"},
    "oncall": {"on-call", "call", "paged"},
    "retention": {"retention", "retained", "kept", "keep"},
    "offline": {"offline"},
    "rollback": {"rollback", "roll", "revert", "release", "deploy"},
}
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NO_CHROMIUM = "no chromium: `apt-get install chromium` (scripts/test installs it where it can)"


def agreement_with_topics(groups: list[list[int]], rows: list[tuple[str, str]]) -> float:
    """Adjusted Rand index of the gaps found against the labelled topics."""
    found = [0] * len(rows)
    for label, members in enumerate(groups):
        for member in members:
            found[member] = label
    return float(adjusted_rand_score([topic for _, topic in rows], found))


async def test_paraphrases_of_one_need_fall_in_one_gap(minilm: MiniLMEmbedder) -> None:
    rows = gap_questions()
    assert len(rows) >= 150
    assert len({topic for _, topic in rows}) >= 10
    groups = await cluster_questions([q for q, _ in rows], minilm, distance=0.8)
    agreement = agreement_with_topics(groups, rows)
    print(f"adjusted Rand index {agreement:.3f} over {len(rows)} questions, {len(groups)} gaps")
    assert agreement >= 0.85  # 0.884 with the default gap_distance


async def test_sketches_of_the_questions_group_them_nearly_as_well(minilm: MiniLMEmbedder) -> None:
    """Privacy mode keeps no question text, only a sketch of its embedding: the gaps it groups
    agree with the topics almost as well as the full vectors' (0.884)."""
    rows = gap_questions()
    vectors = minilm.embed_sync([q for q, _ in rows])
    groups = cluster_vectors([question_sketch(v.tolist()) for v in vectors], distance=0.8)
    agreement = agreement_with_topics(groups, rows)
    print(f"sketches: adjusted Rand index {agreement:.3f}, {len(groups)} gaps")
    assert agreement >= 0.8  # 0.85


def month_report(
    kb: Settings, minilm: MiniLMEmbedder, data_dir: Path, store_questions: bool = True
) -> Report:
    """The report of a month of seeded answers over the bundled docs (synchronous: it is data,
    built on a loop of its own)."""
    settings = over_kb(kb, data_dir)

    async def build() -> Report:
        backend = SqliteBackend(settings, cached(settings, minilm), kb.index_path)
        try:
            now = time.time()
            log = await seed_log(backend, SEEDED, now, store_questions=store_questions)
            return await build_report(
                await log.answer_log(now - 30 * DAY_S),
                since=now - 30 * DAY_S,
                until=now,
                channel=None,
                settings=settings.insights,
                embedder=backend.embedder,
                index=backend.index,
                learned=[],
            )
        finally:
            await backend.close()

    return asyncio.run(build())


def test_without_question_texts_gaps_are_grouped_by_their_sketches(
    kb: Settings, minilm: MiniLMEmbedder, tmp_path: Path
) -> None:
    report = month_report(kb, minilm, tmp_path, store_questions=False)
    assert not report.questions_stored
    missed = sum(g.size for g in report.gaps)
    assert missed > 150
    assert len(report.gaps) < 40  # grouped by meaning (the 168 distinct questions: 12 topics)
    assert max(g.size for g in report.gaps) >= 10
    assert all(g.examples == [] for g in report.gaps)


@pytest.fixture(scope="module")
def seeded_report(
    kb: Settings, minilm: MiniLMEmbedder, tmp_path_factory: pytest.TempPathFactory
) -> Report:
    """Built once for the tests below."""
    return month_report(kb, minilm, tmp_path_factory.mktemp("report"))


async def test_the_figures_add_up(seeded_report: Report) -> None:
    r = seeded_report
    assert r.answers == SEEDED == sum(r.statuses.values()) == sum(r.per_day.values())
    assert sum(r.per_channel.values()) == SEEDED
    assert set(r.per_channel) == {"slack/T1/CDOCS", "slack/T1/CSUPPORT", "discord/42/77"}
    assert r.statuses["answered"] == 400  # two in three are docs questions
    assert r.abstained > 0
    assert r.reasons == {"missing": r.down_votes}
    assert 0 < r.quotes_verified < r.quotes
    assert r.latency_p50_s is not None
    assert r.latency_p95_s is not None
    assert 1.2 <= r.latency_p50_s <= r.latency_p95_s <= 5.0
    assert r.cost_usd is None  # no price configured
    assert r.most_cited
    assert r.never_cited
    assert not {s.doc_id for s in r.most_cited} & {s.doc_id for s in r.never_cited}


async def test_each_seeded_need_is_a_gap_of_its_own(seeded_report: Report) -> None:
    """The cluster table holds the expected clusters: the twelve biggest gaps are the twelve
    seeded topics, each once, each named by one of its words."""
    biggest = seeded_report.gaps[:12]
    matched = {}
    for gap in biggest:
        words = set(gap.label.split(" / "))
        topics = [t for t, distinctive in TOPIC_WORDS.items() if words & distinctive]
        assert topics, gap.label
        matched.setdefault(topics[0], gap.label)
    assert set(matched) == set(TOPIC_WORDS), matched
    assert all(g.size >= 10 for g in biggest)
    assert all(g.examples and g.closest for g in biggest)


def test_hostile_questions_are_text_in_the_page(seeded_report: Report) -> None:
    hostile = Gap(
        label="<b>bold</b>",
        size=1,
        examples=["<script>alert(1)</script><img src=x onerror=alert(2)>"],
        closest=[Passage("t", "javascript:alert(3)")],
        statuses={},
        down_votes=0,
    )
    page = render_html(replace(seeded_report, gaps=[hostile]))
    assert "<script" not in page
    assert "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page
    assert "javascript:" not in page


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_the_page_renders_in_chromium_without_console_errors(
    seeded_report: Report, tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    page.write_text(render_html(seeded_report), encoding="utf-8")
    assert "<script" not in page.read_text(encoding="utf-8")  # readable without JavaScript
    shot = tmp_path / "report.png"
    chrome = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    shown = subprocess.run(
        [
            *chrome,
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1280,1600",
            f"--screenshot={shot}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "CONSOLE" not in shown.stderr, shown.stderr
    dom = subprocess.run(
        [*chrome, "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert dom.count('<tr class="gap">') == len(seeded_report.gaps)
    assert dom.count("<svg") == 2  # both charts drawn
    image = Image.open(shot).convert("L")
    assert image.size == (1280, 1600)
    grey_levels = image.getcolors(maxcolors=256) or []  # (pixels, level) pairs
    assert len(grey_levels) > 50  # text, bars and axes: far from a blank page
    pixels = image.size[0] * image.size[1]
    assert sum(n for n, level in grey_levels if level < 250) > 0.05 * pixels  # 12% drawn on
    assert sum(n for n, level in grey_levels if level < 128) > 0.01 * pixels  # 5% dark


def test_the_command_writes_json_and_html(kb: Settings, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path))
    monkeypatch.setenv("BOT_SEARCH__SQLITE_PATH", str(kb.index_path))
    result = CliRunner().invoke(
        app,
        [
            "report",
            "--since",
            "7d",
            "--json",
            str(out := tmp_path / "r.json"),
            "--html",
            str(tmp_path / "r.html"),
        ],
    )
    assert result.exit_code == 0, result.output
    figures = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert figures["answers"] == 0
    assert figures["gaps"] == []
    assert "<svg" in (tmp_path / "r.html").read_text(encoding="utf-8")
    bad = CliRunner().invoke(app, ["report", "--since", "last tuesday"])
    assert bad.exit_code != 0
    assert "give a duration" in bad.output
    everything = CliRunner().invoke(app, ["report", "--since", "99999999d", "--json", str(out)])
    assert everything.exit_code == 0, everything.output
    assert json.loads(out.read_text(encoding="utf-8"))["since"] == "1970-01-01"


@pytest.mark.parametrize("option", ["--json", "--html"])
def test_a_file_to_write_that_cannot_be_is_refused_before_the_work(
    kb: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str
) -> None:
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path))
    blocker = tmp_path / "blocker"
    blocker.write_text("a file")
    for path, said in [
        (tmp_path, f"{tmp_path} is a folder: name the file to write"),
        (blocker / "r.json", f"{blocker} is a file, so {blocker / 'r.json'} can't be written"),
    ]:
        result = CliRunner().invoke(app, ["report", option, str(path)], env={"COLUMNS": "400"})
        assert result.exit_code == 2
        flat = " ".join(result.output.replace("│", " ").split())  # the usage box wraps
        assert f"Invalid value for '{option}': {said}" in flat
        assert "unexpected" not in result.output
        assert "Answers" not in result.output  # refused before the report was made


def seed_missed(data_dir: Path, asked: list[tuple[str, str]]) -> None:
    """Answers the docs fell short on, logged in `data_dir`'s state file: (conversation key,
    question) each."""
    from core.backends.sqlite.platform_state import SqlitePlatformState
    from core.domain.conversation import Answer, AnswerMode, AnswerStatus

    async def seed() -> None:
        state = SqlitePlatformState(data_dir / "state.sqlite", 1000, 60)
        missed = Answer("The docs don't say.", AnswerStatus.NOT_FOUND, AnswerMode.AGENT)
        try:
            for key, question in asked:
                await state.record_answer(key, question, missed)
        finally:
            await state.close()

    asyncio.run(seed())


def test_a_channel_no_question_came_from_is_named_with_those_that_asked(
    kb: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mistyped `--channel` would otherwise be an empty report that looks like a quiet one."""
    seed_missed(
        tmp_path,
        [("slack/T1/CDOCS/1", "how do I reset sso?")] * 3 + [("discord/42/77/9", "refunds?")],
    )
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path))
    monkeypatch.setenv("BOT_SEARCH__SQLITE_PATH", str(kb.index_path))
    figures, page = tmp_path / "r.json", tmp_path / "r.html"
    env = {"COLUMNS": "400"}
    typo = CliRunner().invoke(
        app,
        ["report", "--channel", "CDOC", "--json", str(figures), "--html", str(page)],
        env=env,
    )
    assert typo.exit_code == 0, typo.output
    said = (
        "No question in this window came from channel CDOC; the channels that asked: "
        "slack/T1/CDOCS (3), discord/42/77 (1)"
    )
    assert said in typo.output
    assert said in page.read_text(encoding="utf-8")
    assert json.loads(figures.read_text(encoding="utf-8"))["other_channels"] == {
        "slack/T1/CDOCS": 3,
        "discord/42/77": 1,
    }
    right = CliRunner().invoke(app, ["report", "--channel", "CDOCS"], env=env)
    assert right.exit_code == 0, right.output
    assert "channel CDOCS: 3 questions" in " ".join(right.output.split())  # the title wraps
    assert "No question in this window" not in right.output


def test_the_command_says_what_it_left_out_of_the_gaps(
    kb: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past `insights.gap_max_questions` distinct missed questions, the least asked are
    counted, not grouped, and the terminal, the JSON and the page all say so."""
    questions = [question for question, _ in gap_questions()[:5]]
    # The first asked most.
    seed_missed(
        tmp_path, [(f"slack/T1/C1/{n}", q) for n, q in enumerate(questions) for _ in range(5 - n)]
    )
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path))
    monkeypatch.setenv("BOT_SEARCH__SQLITE_PATH", str(kb.index_path))
    monkeypatch.setenv("BOT_INSIGHTS__GAP_MAX_QUESTIONS", "3")
    figures, page = tmp_path / "r.json", tmp_path / "r.html"
    result = CliRunner().invoke(
        app, ["report", "--json", str(figures), "--html", str(page)], env={"COLUMNS": "400"}
    )
    assert result.exit_code == 0, result.output
    said = (
        "2 more distinct questions (3 asked) not grouped: the most asked are grouped first "
        "(insights.gap_max_questions)"
    )
    assert said in result.output
    found = json.loads(figures.read_text(encoding="utf-8"))
    assert (found["ungrouped_questions"], found["ungrouped_asks"]) == (2, 3)
    assert sum(g["size"] for g in found["gaps"]) == 12
    assert said in page.read_text(encoding="utf-8")
