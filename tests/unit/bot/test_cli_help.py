"""`bot --help` and every command's own: what the docstrings say, as written, one paragraph to
a line when the terminal is wide enough. Typer's default markup keeps a docstring's line breaks,
so a command list read "or those ingested from a" then "path (a file...)" on the next line."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer.rich_utils
from typer.main import get_command
from typer.testing import CliRunner

from bot.cli import app

WIDE = 1000  # columns: wider than any paragraph, so a break inside one is the docstring's
MARKUP = re.compile(r"`")


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    for name, sub in (getattr(command, "commands", None) or {}).items():
        yield from _commands(sub, (*path, name))


COMMANDS = list(_commands(get_command(app)))


def _plain(text: str) -> str:
    """A help text as the terminal shows it: markdown's code marks gone, one space between words."""
    return " ".join(MARKUP.sub("", text).split())


def _help_lines(path: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setattr(typer.rich_utils, "MAX_WIDTH", WIDE)
    result = CliRunner().invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    return [" ".join(line.replace("│", " ").split()) for line in result.output.splitlines()]


@pytest.mark.parametrize(
    ("path", "command"),
    [(p, c) for p, c in COMMANDS if getattr(c, "commands", None)],
    ids=[" ".join(("bot", *p)) for p, c in COMMANDS if getattr(c, "commands", None)],
)
def test_a_command_list_shows_each_commands_summary_on_one_line(
    path: tuple[str, ...], command: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = _help_lines(path, monkeypatch)
    for name, sub in command.commands.items():
        summary = _plain((sub.short_help or sub.help or "").split("\n\n")[0])
        assert summary, f"{name} has no help"
        assert f"{name} {summary}" in lines, f"{name}: {summary!r} is not one line of the list"


@pytest.mark.parametrize(
    ("path", "command"), COMMANDS[1:], ids=[" ".join(p) for p, _ in COMMANDS[1:]]
)
def test_a_commands_help_shows_its_docstring_and_parameters_as_written(
    path: tuple[str, ...], command: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = _help_lines(path, monkeypatch)
    for paragraph in (command.help or "").split("\n\n"):
        assert _plain(paragraph) in lines, f"{paragraph!r} is not one line of the help"
    for param in command.params:
        if text := _plain(getattr(param, "help", None) or ""):
            assert any(text in line for line in lines), f"{param.name}: {text!r} is not shown"
