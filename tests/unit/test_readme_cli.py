"""The README's "Using it" synopsis and the CLI agree: every command and option the CLI has is
listed there, and every command and option listed there exists. (The synopsis had lost
`bot sync`, `bot sources list`, `bot report`, `bot stale-answers`, two `bot eval` commands and
a dozen options as they were added.)"""

from __future__ import annotations

import re
from typing import Any

import typer.main

from bot.cli import app
from tests.conftest import REPO

# Options every command has, or typer's shell-completion installers: not the bot's own.
_GENERIC = {"--help", "--install-completion", "--show-completion"}


def _synopsis() -> list[str]:
    readme = (REPO / "README.md").read_text()
    section = readme.split("\n## Using it\n", 1)[1]
    block = re.search(r"```\n(.*?)```", section, re.S)
    assert block is not None, "README: no command block under 'Using it'"
    return block.group(1).splitlines()


# typer runs on a click of its own (`typer._click`): its commands and options are not
# `click.Group` / `click.Option`, so they are told apart by what they have.
def _commands() -> dict[tuple[str, ...], Any]:
    """Every command path of the CLI (() for the root), with its command."""
    found: dict[tuple[str, ...], Any] = {}

    def walk(path: tuple[str, ...], command: Any) -> None:
        found[path] = command
        for name, sub in getattr(command, "commands", {}).items():
            walk((*path, name), sub)

    walk((), typer.main.get_command(app))
    return found


def _option_params(command: Any) -> list[Any]:
    return [
        param
        for param in command.params
        if param.param_type_name == "option" and not set(param.opts) & _GENERIC
    ]


def _names(command: Any) -> set[str]:
    return {
        name for param in _option_params(command) for name in (*param.opts, *param.secondary_opts)
    }


def _usages() -> list[tuple[tuple[str, ...], list[str]]]:
    """Each `bot …` usage of the synopsis (a line may hold several, `|`-separated) as its
    command path and the rest of its words."""
    commands = _commands()
    usages = []
    for line in _synopsis():
        for part in re.split(r"\s\|\s(?=bot\b)", line):
            words = part.split()
            assert words[0] == "bot", line
            path: tuple[str, ...] = ()
            rest = words[1:]
            while rest and (*path, rest[0]) in commands:
                path, rest = (*path, rest[0]), rest[1:]
            usages.append((path, rest))
    return usages


def _options(words: list[str]) -> set[str]:
    """`[--learned|--not-learned]`, `[--sitemap URL]...`, `| --socket` -> the option names."""
    found = set()
    for word in words:
        for piece in re.split(r"[|\[\]]", word):
            if piece.startswith("-"):
                found.add(piece.rstrip("."))
    return found


def test_every_command_and_option_is_in_the_synopsis() -> None:
    listed: dict[tuple[str, ...], set[str]] = {}
    for path, words in _usages():
        listed.setdefault(path, set()).update(_options(words))
    for path, command in _commands().items():
        shown = " ".join(("bot", *path))
        if getattr(command, "commands", None) and not _names(command) and path:
            continue  # a group of commands, no options of its own: its commands are listed
        assert path in listed, f"README 'Using it' does not list `{shown}`"
        missing = {
            param.opts[0]
            for param in _option_params(command)
            if not {*param.opts, *param.secondary_opts} & listed[path]
        }
        assert not missing, f"README 'Using it' does not show {sorted(missing)} of `{shown}`"


def test_every_command_and_option_in_the_synopsis_exists() -> None:
    commands = _commands()
    for path, words in _usages():
        shown = " ".join(("bot", *path))
        # A lower-case word where the command ends is a command that does not exist.
        assert not (words and re.fullmatch(r"[a-z][a-z-]*", words[0])), (
            f"README 'Using it': `{shown} {words[0]}` is not a command"
        )
        unknown = _options(words) - _names(commands[path])
        assert not unknown, f"README 'Using it': `{shown}` has no option {sorted(unknown)}"
