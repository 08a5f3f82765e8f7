"""Which model's settings the engine is built with, read from the settings alone."""

from __future__ import annotations

import pytest

from bot.wiring import grounds_tool_answers
from core.config_loader import load_settings
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
