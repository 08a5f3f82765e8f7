"""`bot ask` and `bot chat`: the terminal as a chat platform."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from bot.cli.app import EXIT_USER_ERROR, app, err, out, state, typed_text
from bot.logs import configure_logging

if TYPE_CHECKING:
    from adapters.console.session import ConsoleSession
    from core.config import Settings
    from core.domain.conversation import Answer
    from core.ports import SearchIndex

PROMPT = "[bold]> [/bold]"


@app.command()
def ask(
    question: Annotated[
        str, typer.Argument(help="The question, in plain words.", callback=typed_text)
    ],
    as_json: Annotated[bool, typer.Option("--json", help="The whole answer object.")] = False,
    conversation: Annotated[
        str | None,
        typer.Option(
            help="Continue a conversation: earlier turns are context.", callback=typed_text
        ),
    ] = None,
) -> None:
    """Ask a question; the answer cites its sources (the same path as Slack and Discord)."""
    if not question.strip():
        err.print('error: the question is empty: bot ask "How do I ...?"', soft_wrap=True)
        raise typer.Exit(EXIT_USER_ERROR)
    if not asyncio.run(_converse([question], as_json, conversation)):
        # An error answer is one the person acts on (a question too long, the knowledge base
        # unreachable): the exit code of a `BotError`, as `bot search` gives for the latter.
        raise typer.Exit(EXIT_USER_ERROR)


@app.command()
def chat(
    conversation: Annotated[
        str | None, typer.Option(help="Resume a conversation by name.", callback=typed_text)
    ] = None,
) -> None:
    """A conversation in the terminal: ask follow-ups; an empty line or Ctrl-D ends it."""
    asyncio.run(_converse(None, False, conversation))


async def _converse(questions: list[str] | None, as_json: bool, conversation: str | None) -> bool:
    """False when an answer was an error (a question too long, the knowledge base
    unreachable): `bot ask` exits non-zero for it; `bot chat` carries on with the next line."""
    from adapters.console.session import ConsoleSession
    from bot.runtime import opened

    s = state.settings
    if s.logging.level == "INFO":  # service logs would interleave with the answers on screen
        configure_logging(s.logging.model_copy(update={"level": "WARNING"}))
    answered = True
    async with opened(s) as rt:
        session = ConsoleSession(rt.engine(), out, conversation)
        await _warn_of_unindexed_sources(s, rt.backend.index, session.conversation_key)
        if questions is not None:
            for question in questions:
                answered = _show(session, await session.ask(question), as_json) and answered
            return answered
        while True:
            try:
                line = await _read_line(PROMPT)
            except EOFError:
                break
            if not line.strip():
                break
            _show(session, await session.ask(line), as_json)
    return answered


async def _warn_of_unindexed_sources(settings: Settings, index: SearchIndex, key: str) -> None:
    """A policy limiting the terminal to sources the index has nothing of (a typo in
    `channels.default.sources`) would make every answer "nothing found": said once, up front."""
    from bot.diagnostics import not_indexed

    policy = settings.policy(key)
    if not policy.sources:
        return
    stats = await index.stats()
    if stats.chunks and (missing := not_indexed(settings, policy.sources, stats.sources)):
        err.print(
            Text(f"warning: answers here search only {', '.join(policy.sources)}: {missing}"),
            soft_wrap=True,
        )


def _show(session: ConsoleSession, answer: Answer, as_json: bool) -> bool:
    """The answer, or for an error only its message on stderr: no answer header above it (an
    "Extractive answer" line over "That question is too long" misleads). False for an error."""
    from core.domain.conversation import AnswerStatus

    if answer.status is not AnswerStatus.ERROR:
        session.show(answer, as_json)
        return True
    if as_json:  # the whole object still, for a script that reads its status
        session.show(answer, as_json)
    else:
        err.print(Text(f"error: {answer.text}", style="red"), soft_wrap=True)
    return False


async def _read_line(prompt: str) -> str:
    """One line from the keyboard, read in a daemon thread of its own. Not the loop's default
    executor: on Ctrl-C, `asyncio.run` waits for that executor's threads before it returns,
    and one blocked in `input()` would keep the process alive until the next keystroke that
    ends the line (and the interpreter joins a non-daemon thread at exit just the same)."""
    loop = asyncio.get_running_loop()
    line: asyncio.Future[str] = loop.create_future()

    def settle(value: str | None, error: BaseException | None) -> None:
        if line.done():  # cancelled by Ctrl-C while the thread was still reading
            return
        if error is not None:
            line.set_exception(error)
        else:
            line.set_result(value or "")

    def read() -> None:
        value, error = None, None
        try:
            value = _typed_line(prompt)
        except Exception as exc:  # noqa: BLE001 (EOFError for Ctrl-D, ...: raised by the await)
            error = exc
        # RuntimeError: the loop is closed, nobody waits for this line any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=read, name="bot-chat-input", daemon=True).start()
    return await line


def _typed_line(prompt: str) -> str:
    """The next line of the process's standard input. A terminal's is read with `input()`
    (line editing); a pipe's (`docker run -i` without `-t`, a script feeding the chat) straight
    from the file descriptor: `input()` there blocks holding stdin's buffer lock, and Ctrl-C at
    the prompt then aborted the interpreter's shutdown on that lock ("Fatal Python error:
    _enter_buffered_busy", a thread dump, exit 134) instead of ending with 130."""
    stdin = sys.stdin
    if stdin is not sys.__stdin__ or stdin is None or stdin.isatty():  # a stand-in, a terminal
        return out.input(prompt)
    out.print(prompt, end="")
    with open(stdin.fileno(), "rb", buffering=0, closefd=False) as unbuffered:
        line = unbuffered.readline()
    if not line:
        raise EOFError
    return line.decode(stdin.encoding or "utf-8", errors="replace").rstrip("\r\n")
