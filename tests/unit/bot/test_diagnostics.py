"""`bot doctor`'s configuration rows: which model answers and why, which platform tokens are
set (by name, never by value), the web search state; and they agree with what the wiring
actually builds."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from bot.diagnostics import Check, channel_policy, configuration, model_tools, policy_sources
from bot.wiring import build_model
from core.answer.claude import ClaudeModel
from core.answer.openai_compat import OpenAICompatibleModel, tool_support_key
from core.backends.sqlite.model_facts import SqliteModelFacts
from core.config import Settings
from core.config_loader import load_settings
from tests.conftest import REPO

OLLAMA = {"BOT_OPENAI__BASE_URL": "http://localhost:11434/v1", "BOT_OPENAI__MODEL": "qwen2.5"}


def _settings(**env: str) -> Settings:
    return load_settings(REPO / "config.yaml", environ={"BOT_STORAGE__DATA_DIR": "/tmp/x", **env})


def _row(settings: Settings, name: str) -> Check:
    (row,) = [c for c in configuration(settings) if c.name == name]
    return row


@pytest.mark.parametrize(
    ("env", "ok", "detail"),
    [
        (
            {"ANTHROPIC_API_KEY": "sk-ant-SECRET"},
            True,
            "Claude claude-sonnet-4-6 (ANTHROPIC_API_KEY is set)",
        ),
        (
            {"ANTHROPIC_API_KEY": "sk-ant-SECRET", **OLLAMA},
            True,
            "Claude claude-sonnet-4-6 (ANTHROPIC_API_KEY is set)",
        ),
        (
            OLLAMA,
            True,
            "qwen2.5 at http://localhost:11434/v1 (OpenAI-compatible, without OPENAI_API_KEY; "
            "ANTHROPIC_API_KEY is not set)",
        ),
        (
            {"ANTHROPIC_API_KEY": "sk-ant-SECRET", "BOT_ANSWERS__PROVIDER": "openai", **OLLAMA},
            True,
            "qwen2.5 at http://localhost:11434/v1 (OpenAI-compatible, without OPENAI_API_KEY; "
            "answers.provider is openai)",
        ),
        (
            {
                **OLLAMA,
                "BOT_OPENAI__BASE_URL": "https://bob:hunter2@llm.example/v1",
                "OPENAI_API_KEY": "sk-SECRET",
            },
            True,
            "qwen2.5 at https://llm.example/v1 (OpenAI-compatible, with OPENAI_API_KEY; "
            "ANTHROPIC_API_KEY is not set)",
        ),
        (
            {},
            True,
            "none: extractive answers, the best passages quoted (neither ANTHROPIC_API_KEY nor "
            "openai.base_url + openai.model is set)",
        ),
        (
            {"ANTHROPIC_API_KEY": "sk-ant-SECRET", "BOT_ANSWERS__PROVIDER": "extractive"},
            True,
            "none: extractive answers, the best passages quoted (answers.provider is extractive)",
        ),
        (
            {"BOT_ANSWERS__PROVIDER": "anthropic", **OLLAMA},
            False,
            "answers.provider is anthropic but ANTHROPIC_API_KEY is not set: answers would be "
            "extractive",
        ),
        (
            {"ANTHROPIC_API_KEY": "sk-ant-SECRET", "BOT_ANSWERS__PROVIDER": "openai"},
            False,
            "answers.provider is openai but openai.base_url and openai.model are not both set: "
            "answers would be extractive",
        ),
    ],
)
def test_the_model_row_says_which_model_answers_and_why(
    env: dict[str, str], ok: bool, detail: str
) -> None:
    settings = _settings(**env)
    row = _row(settings, "model")
    assert (row.ok, row.detail) == (ok, detail)
    assert row.info is ok  # a contradiction is a failure, not information
    # The row describes what the wiring builds (build_engine: Claude, else the OpenAI-compatible
    # agent), not a second opinion.
    model = build_model(settings)
    assert row.detail.startswith("Claude") == isinstance(model, ClaudeModel)
    assert ("OpenAI-compatible" in row.detail) == isinstance(model, OpenAICompatibleModel)


def test_platform_tokens_are_named_never_shown() -> None:
    settings = _settings(SLACK_BOT_TOKEN="xoxb-VALUE-1", SLACK_APP_TOKEN="xapp-VALUE-2")
    row = _row(settings, "platform tokens")
    assert (row.ok, row.info) == (True, True)
    assert row.detail == (
        "set: SLACK_BOT_TOKEN, SLACK_APP_TOKEN; not set: SLACK_SIGNING_SECRET, DISCORD_TOKEN; "
        "can start: bot slack --socket"
    )
    everything = " ".join(c.detail for c in configuration(settings))
    assert "VALUE" not in everything

    none = _row(_settings(), "platform tokens")
    assert none.detail.endswith("; no platform command can start")
    all_set = _row(
        _settings(
            SLACK_BOT_TOKEN="a", SLACK_SIGNING_SECRET="b", SLACK_APP_TOKEN="c", DISCORD_TOKEN="d"
        ),
        "platform tokens",
    )
    assert all_set.detail.endswith("can start: bot slack --http, bot slack --socket, bot discord")


@pytest.mark.parametrize(
    ("env", "ok", "detail"),
    [
        ({}, True, "off (web_search.enabled, web_search.channels, channel policies)"),
        (
            {"PERPLEXITY_API_KEY": "pplx-SECRET"},
            True,
            "off (web_search.enabled, web_search.channels, channel policies); "
            "PERPLEXITY_API_KEY is set but unused",
        ),
        (
            {"BOT_WEB_SEARCH__ENABLED": "true", "PERPLEXITY_API_KEY": "pplx-SECRET"},
            True,
            "on everywhere; sonar at https://api.perplexity.ai; PERPLEXITY_API_KEY set",
        ),
        (
            {
                "BOT_WEB_SEARCH__ENABLED": "true",
                "BOT_WEB_SEARCH__CHANNELS": '{"slack/T1/C2": false, "discord/9": false}',
                "PERPLEXITY_API_KEY": "pplx-SECRET",
            },
            True,
            "on everywhere except discord/9, slack/T1/C2; sonar at https://api.perplexity.ai; "
            "PERPLEXITY_API_KEY set",
        ),
        (
            {
                "BOT_WEB_SEARCH__CHANNELS": '{"slack/T1": true, "slack/T1/C2": false}',
                "BOT_WEB_SEARCH__BASE_URL": "https://u:hunter2@search.example",
                "PERPLEXITY_API_KEY": "pplx-SECRET",
            },
            True,
            "on in slack/T1 only (not in slack/T1/C2); sonar at https://search.example; "
            "PERPLEXITY_API_KEY set",
        ),
        (
            {"BOT_WEB_SEARCH__ENABLED": "true"},
            False,
            "on everywhere, but PERPLEXITY_API_KEY is not set: every command that answers "
            "(bot ask, chat, slack, discord) stops at start",
        ),
        (
            {
                "BOT_CHANNELS__POLICIES": '{"slack/T1/C3": {"web_search": true}}',
                "PERPLEXITY_API_KEY": "pplx-SECRET",
            },
            True,
            "on in slack/T1/C3 only; sonar at https://api.perplexity.ai; PERPLEXITY_API_KEY set",
        ),
        (
            {
                "BOT_WEB_SEARCH__ENABLED": "true",
                "BOT_CHANNELS__POLICIES": '{"discord/9": {"web_search": false}}',
                "PERPLEXITY_API_KEY": "pplx-SECRET",
            },
            True,
            "on everywhere except discord/9; sonar at https://api.perplexity.ai; "
            "PERPLEXITY_API_KEY set",
        ),
        # A policy's web_search overrides the web_search section: the row says what resolves.
        (
            {
                "BOT_CHANNELS__DEFAULT__WEB_SEARCH": "true",
                "BOT_WEB_SEARCH__CHANNELS": '{"discord/9": false}',
                "PERPLEXITY_API_KEY": "pplx-SECRET",
            },
            True,
            "on everywhere; sonar at https://api.perplexity.ai; PERPLEXITY_API_KEY set",
        ),
        (
            {"BOT_WEB_SEARCH__ENABLED": "true", "BOT_CHANNELS__DEFAULT__WEB_SEARCH": "false"},
            True,
            "off (web_search.enabled, web_search.channels, channel policies)",
        ),
        (
            {
                "BOT_WEB_SEARCH__CHANNELS": '{"slack/T1/C3": true}',
                "BOT_CHANNELS__POLICIES": '{"slack/T1": {"web_search": false}}',
            },
            True,
            "off (web_search.enabled, web_search.channels, channel policies)",
        ),
        (
            {
                "BOT_CHANNELS__POLICIES": json.dumps(
                    {"slack/T1": {"web_search": True}, "slack/T1/C3": {"web_search": False}}
                ),
                "PERPLEXITY_API_KEY": "pplx-SECRET",
            },
            True,
            "on in slack/T1 only (not in slack/T1/C3); sonar at https://api.perplexity.ai; "
            "PERPLEXITY_API_KEY set",
        ),
        (
            {"BOT_CHANNELS__DEFAULT__WEB_SEARCH": "true"},
            False,
            "on everywhere, but PERPLEXITY_API_KEY is not set: every command that answers "
            "(bot ask, chat, slack, discord) stops at start",
        ),
        (
            {"BOT_WEB_SEARCH__CHANNELS": '{"discord/9": true}'},
            False,
            "on in discord/9 only, but PERPLEXITY_API_KEY is not set: every command that answers "
            "(bot ask, chat, slack, discord) stops at start",
        ),
    ],
)
def test_the_web_search_row_fails_only_on_a_contradiction(
    env: dict[str, str], ok: bool, detail: str
) -> None:
    row = _row(_settings(**env), "web search")
    assert (row.ok, row.detail) == (ok, detail)


def test_the_data_row_says_where_the_data_is() -> None:
    row = _row(_settings(BOT_STORAGE__DATA_DIR="/srv/bot-data"), "data")
    assert row.detail == (
        "/srv/bot-data (index /srv/bot-data/index.sqlite, conversations, embedding cache)"
    )
    es = _row(
        _settings(BOT_STORAGE__DATA_DIR="/srv/bot-data", BOT_SEARCH__BACKEND="elasticsearch"),
        "data",
    )
    assert es.detail == (
        "/srv/bot-data (the embedding cache; the index and the shared state are in the cluster)"
    )


async def test_the_model_tools_row_says_what_was_learned_about_the_server(
    tmp_path: Path,
) -> None:
    settings = _settings(**OLLAMA, BOT_STORAGE__DATA_DIR=str(tmp_path))
    facts = SqliteModelFacts(settings.state_path, 1_000)
    backend = SimpleNamespace(facts=facts)
    [row] = await model_tools(settings, backend)  # type: ignore[arg-type]
    assert row.detail.startswith("not known yet")
    await facts.put(tool_support_key(settings.openai), "none")
    [row] = await model_tools(settings, backend)  # type: ignore[arg-type]
    assert row.detail.startswith("none: answers by search-then-answer")
    named = settings.model_copy(
        update={"openai": settings.openai.model_copy(update={"tool_support": "named"})}
    )
    [row] = await model_tools(named, backend)  # type: ignore[arg-type]
    assert row.detail == "named (openai.tool_support): answers with tool use"
    claude = _settings(**OLLAMA, ANTHROPIC_API_KEY="sk-ant-SECRET")
    assert await model_tools(claude, backend) == []  # type: ignore[arg-type]
    await facts.close()


def test_a_policy_source_with_no_document_fails_and_says_what_to_do() -> None:
    policies = {"slack/T1": {"sources": ["handbook", "docs"]}, "slack/T2": {"sources": ["docs"]}}
    settings = _settings(
        BOT_CHANNELS__POLICIES=json.dumps(policies),
        BOT_SOURCES='{"handbook": {"type": "files", "location": ["/srv/handbook"]}}',
    )
    [row] = policy_sources(settings, {"docs": 12})
    assert (row.ok, row.detail) == (
        False,
        "channels.policies.slack/T1: source handbook has no document in the index: run "
        "`bot sync handbook` (indexed: docs)",
    )
    channel = channel_policy(settings, "slack/T1/C9", {"docs": 12})
    assert not channel.ok
    assert channel.detail.endswith(
        "; source handbook has no document in the index: run `bot sync handbook` (indexed: docs)"
    )
    [row] = policy_sources(settings, {"docs": 12, "handbook": 3})
    assert (row.ok, row.detail) == (True, "every source a policy names is indexed: docs, handbook")
    assert channel_policy(settings, "slack/T2/C1", {"docs": 12}).ok
    assert channel_policy(settings, "slack/T1/C9", None).info  # index unread: shown, not judged


def test_no_sources_row_when_no_policy_names_one() -> None:
    assert policy_sources(_settings(), {}) == []


async def test_readiness_names_an_empty_or_unreadable_index_and_nothing_more(
    settings: Settings, embedder
) -> None:
    from bot.diagnostics import readiness
    from core.backends.sqlite.index import SqliteIndex

    index = SqliteIndex(settings.index_path, embedder, settings.search)
    assert await readiness(index) == "the knowledge base is empty: nothing has been ingested"
    await index.close()
    said = await readiness(index)
    assert said == "the index can't be read (SearchIndexError): run bot doctor"
    assert str(settings.index_path) not in said


async def test_the_readiness_probe_looks_at_the_index_once_per_period() -> None:
    """/readyz is on a public port and the look scans the index: many probes at once, and
    probes within `slack.readiness_cache_s`, share one look."""
    import asyncio

    from bot.diagnostics import ReadinessProbe
    from core.domain.documents import IndexStats

    class Counting:
        looks = 0

        async def stats(self) -> IndexStats:
            Counting.looks += 1
            await asyncio.sleep(0.01)
            return IndexStats(documents=1, chunks=1, learned_chunks=0, sources={"docs": 1})

    probe = ReadinessProbe(Counting(), ttl_s=60)  # type: ignore[arg-type]
    assert await asyncio.gather(*(probe() for _ in range(20))) == [None] * 20
    assert await probe() is None
    assert Counting.looks == 1
    always = ReadinessProbe(Counting(), ttl_s=0)  # type: ignore[arg-type]
    await always()
    await always()
    assert Counting.looks == 3
