"""Which model's settings the engine is built with, read from the settings alone."""

from __future__ import annotations

import pytest

from bot.runtime import opened
from bot.wiring import grounds_tool_answers
from core.config import LimitSettings, Settings
from core.config_loader import load_settings
from core.domain.conversation import AnswerStatus, ChannelKind, Question
from core.search.embedder import CachedEmbedder
from tests.conftest import REPO


@pytest.mark.parametrize(
    ("environ", "grounded"),
    [
        ({}, True),  # no Claude: an OpenAI-compatible server's answers are grounded
        ({"ANTHROPIC_API_KEY": "sk-ant-test"}, False),  # Claude's are not, by default
        ({"ANTHROPIC_API_KEY": "sk-ant-test", "BOT_ANSWERS__PROVIDER": "openai"}, True),
        ({"ANTHROPIC_API_KEY": "sk-ant-test", "BOT_ANTHROPIC__GROUND_ANSWERS": "true"}, True),
        ({"BOT_OPENAI__GROUND_ANSWERS": "false"}, False),
    ],
)
def test_the_chosen_models_ground_answers_applies(environ: dict[str, str], grounded: bool) -> None:
    settings = load_settings(REPO / "config.yaml", environ=environ)
    assert grounds_tool_answers(settings) is grounded


async def test_only_the_chat_adapters_engine_caps_one_asker(
    settings: Settings, embedder: CachedEmbedder
) -> None:
    """`bot slack` and `bot discord` build theirs with `chat=True` (`answers.limits`); the
    terminal, evaluations and reports never tell their user to wait."""
    capped = settings.answers.model_copy(update={"limits": LimitSettings(per_asker=1)})
    bounded = settings.model_copy(update={"answers": capped})
    for chat, second in ((True, AnswerStatus.ERROR), (False, AnswerStatus.NOT_FOUND)):
        async with opened(bounded, embedder=embedder) as rt:
            engine = rt.engine(chat=chat)
            kind = ChannelKind.DIRECT
            asked = [
                await engine.answer(Question("slack", f"k{n}", "U1", "What is prune?", kind))
                for n in range(2)
            ]
        assert asked[0].status is AnswerStatus.NOT_FOUND  # the index is empty
        assert asked[1].status is second, chat
