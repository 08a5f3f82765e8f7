"""Extractive answers (no model, or the model down) from a document written to attack: its
own links, URL-looking text and pings, in its title, headings and body. The real ingest, index
and engine; the answer rendered for Slack, Discord and the terminal; the same property as the
model's answers: every URL a client could open is one of the answer's sources, nobody pinged."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.backends.sqlite.index import SqliteIndex
from core.config_loader import load_settings
from core.domain.conversation import AnswerMode
from core.ingest.pipeline import Ingestor
from core.search.embedder import MiniLMEmbedder
from tests.conftest import REPO
from tests.fakes.anthropic_api import FakeMessagesAPI, overloaded
from tests.integration.answers.helpers import cached, engine, question
from tests.integration.answers.test_claude_answers import agent
from tests.unit.adapters.test_hostile_rendering import PINGS, linked_urls, rendered_everywhere

BASE = "https://docs.example.com/"
ATTACK = (
    "Reset the widget: open <https://evil.example/reset|the reset page>, "
    "[the docs](https://evil.example/docs), "
    "[https://evil.example/login](https://docs.example.com/x), "
    "https://docs.example.com@evil.example/, evil.example/login, www.evil.example, "
    "![pixel](https://evil.example/p.png), [run](javascript:alert(1)), "
    '<a href="https://evil.example/a">here</a>, https://evil\u200b.example/zw, '
    "[ref][1].\n\n[1]: https://evil.example/ref\n\n" + " ".join(PINGS)
)
DOCUMENT = (
    "# Widget <https://evil.example|reset> guide @everyone <!channel>\n\n"
    "## Reset [x](https://evil.example/h) https://docs.example.com@evil.example/ <!here>\n\n"
    f"{ATTACK}\n\nThe widget reset takes a minute and keeps your settings.\n"
)


@pytest.fixture
async def hostile_index(tmp_path: Path, minilm: MiniLMEmbedder):
    settings = load_settings(REPO / "config.yaml", environ={"BOT_STORAGE__DATA_DIR": str(tmp_path)})
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "widget.md").write_text(DOCUMENT, encoding="utf-8")
    embedder = cached(settings, minilm)
    index = SqliteIndex(settings.index_path, embedder, settings.search)
    report = await Ingestor(index, embedder, settings.ingest).ingest(
        [str(docs)], source="kb", base_url=BASE
    )
    assert not report.skipped
    yield settings, index
    await index.close()


def _assert_safe_everywhere(answer) -> None:
    assert answer.mode is AnswerMode.EXTRACTIVE
    assert answer.citations, "the hostile document must be what was quoted"
    allowed = {c.url for c in answer.citations} | {c.url.split("#")[0] for c in answer.citations}
    assert all(url.startswith(BASE) for url in allowed)
    for where, rendered in rendered_everywhere(answer).items():
        unknown = [url for url in linked_urls(rendered) if url not in allowed]
        assert not unknown, f"{where}: {unknown} in {rendered!r}"
        for ping in ("<!channel>", "<!here>", "<!everyone>", "<@", "<#", "<!subteam", "@everyone",
                     "@here", "@channel"):  # fmt: skip
            assert ping not in rendered, f"{where}: {ping} in {rendered!r}"
    for citation in answer.citations:
        assert "evil" not in citation.title
        assert "evil" not in citation.quote


async def test_no_model_extractive_answer_publishes_no_document_link(hostile_index) -> None:
    settings, index = hostile_index
    answer = await engine(settings, index).answer(question("how do I reset the widget?"))
    _assert_safe_everywhere(answer)
    assert "evil" not in answer.text
    assert "Widget" in answer.text  # the title line is still there, only unlinked


async def test_model_down_extractive_answer_publishes_no_document_link(hostile_index) -> None:
    settings, index = hostile_index
    api = FakeMessagesAPI([overloaded(), overloaded(), overloaded()])
    answer = await engine(settings, index, model=agent(api)).answer(
        question("how do I reset the widget?")
    )
    assert "unavailable" in answer.text
    _assert_safe_everywhere(answer)
    assert "evil" not in answer.text
