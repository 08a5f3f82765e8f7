"""The `bot` command: the typer app, its shared settings and output, and how every failure ends."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.style import Style
from rich.text import Text

from bot.logs import configure_logging
from core.config import Settings
from core.config_loader import load_settings, settings_file
from core.domain.text import printable

# No pretty exceptions: they print every frame's local variables (tokens, message texts), and
# `main()` turns every failure into one line anyway. Markdown help: a docstring's paragraphs
# reflow to the terminal (typer's default "rich" mode keeps every line break of the source).
app = typer.Typer(
    help="A docs bot: answers questions from your documentation, with sources.",
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    rich_markup_mode="markdown",
)
out = Console()
err = Console(stderr=True)

EXIT_FAILURE = 1
EXIT_USER_ERROR = 2


# The long-running processes (the Procfile's), whose logs an operator reads; every other
# command is one-shot and ends in its own one-line outcome.
SERVICES = ("slack", "discord", "clock")
_Text = TypeVar("_Text", str, str | None, list[str] | None)


class _State:
    settings: Settings
    settings_file: str = "config.yaml"  # the file read, for messages that name it
    verbose: bool = False


state = _State()


@app.callback()
def _main(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="Settings file (default: $BOT_CONFIG or config.yaml)."),
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="On failure, print the traceback too.")
    ] = False,
) -> None:
    state.verbose = verbose
    state.settings = load_settings(config)
    state.settings_file = str(settings_file(config))
    configure_logging(state.settings.logging, retries_logged=ctx.invoked_subcommand in SERVICES)


def shown(text: str, style: str | Style = "") -> Text:
    """Text from outside the bot (the answer log, documents, a server's error, a setting) as
    the terminal may show it: a `Text`, so never read as rich markup (a `[/bold]` in a question
    would stop the command, a `[link=...]` would make a link), and without the characters a
    terminal acts on (`printable`)."""
    return Text(printable(text), style=style)


def typed_text(value: _Text) -> _Text:
    """A question, a query or a name as the user meant it: bytes the terminal sent that are not
    UTF-8 (a Latin-1 terminal's `café`) reach Python as lone surrogates, which no tokenizer or
    database accepts; each becomes U+FFFD, as `bot chat` reads such a line."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    if isinstance(value, list):
        return [typed_text(item) for item in value]
    return value


def when(timestamp: float) -> str:
    """A moment as the CLI's tables show it: UTC, to the minute."""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M")


def refuse(problem: str) -> NoReturn:
    err.print(shown(f"error: {problem}", style="red"), soft_wrap=True)
    raise typer.Exit(EXIT_FAILURE)


def main() -> None:
    """Every failure ends as one line and a non-zero exit code; `-v` adds the traceback.

    A `BotError` says what went wrong and what to do. Anything else is unexpected (a bug, or
    a failure nobody translated yet), and is still one line naming its type, never a page of
    traceback that buries the cause (with `-v`: the traceback, for a bug report).
    """
    from core.errors import BotError

    try:
        # Not standalone: typer's own handling prints a usage error as a six-line box.
        code = app(standalone_mode=False)
    except typer.TyperException as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # click's, vendored by typer or not
            # `bot`, or a group without its command: its help, which typer's rich formatting
            # has printed already while the error was made (plain click carries it instead).
            if help_text := exc.format_message().strip():
                out.print(help_text, markup=False, highlight=False)
            sys.exit(exc.exit_code)
        # Usage errors (exit code 2) carry the command they are about, and its help points on.
        ctx = getattr(exc, "ctx", None)
        hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        _fail(exc, f"error: {exc.format_message().rstrip('.')}{hint}", exc.exit_code)
    except typer.Abort as exc:
        _fail(exc, "error: aborted", EXIT_FAILURE)
    except BotError as exc:
        _fail(exc, f"error: {exc}", EXIT_USER_ERROR)
    except Exception as exc:  # noqa: BLE001 (the last handler: one line, not a traceback)
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else "no details"
        _fail(
            exc,
            f"error: unexpected {type(exc).__name__}: {detail} "
            "(run `bot -v ...` for the traceback)",
            EXIT_FAILURE,
        )
    else:
        # A `typer.Exit`'s code, which non-standalone click returns instead of exiting with.
        sys.exit(code if isinstance(code, int) else 0)


def _fail(exc: BaseException, line: str, code: int) -> None:
    from core.domain.urls import redact_urls_in

    if _verbose_requested():
        import traceback

        traceback.print_exception(exc, file=sys.stderr)
    # A server's own reason may be quoted, escape sequences and all: shown, never acted on.
    err.print(shown(redact_urls_in(line), style="red"), soft_wrap=True)
    sys.exit(code)


def _verbose_requested() -> bool:
    """`-v` anywhere on the command line: before the command (`bot -v ask`) or after it, where
    some commands also read it as "more detail" (`bot ingest -v` lists every skip)."""
    return state.verbose or any(arg in ("-v", "--verbose") for arg in sys.argv[1:])
