"""`bot ask` and `bot chat`: the terminal as a chat platform."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from bot.cli.app import EXIT_USER_ERROR, app, err, out, state
from bot.logs import configure_logging


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question, in plain words.")],
    as_json: Annotated[bool, typer.Option("--json", help="The whole answer object.")] = False,
    conversation: Annotated[
        str | None, typer.Option(help="Continue a conversation: earlier turns are context.")
    ] = None,
) -> None:
    """Ask a question; the answer cites its sources (the same path as Slack and Discord)."""
    if not question.strip():
        err.print('error: the question is empty: bot ask "How do I ...?"', soft_wrap=True)
        raise typer.Exit(EXIT_USER_ERROR)
    asyncio.run(_converse([question], as_json, conversation))


@app.command()
def chat(
    conversation: Annotated[str | None, typer.Option(help="Resume a conversation by name.")] = None,
) -> None:
    """A conversation in the terminal: ask follow-ups; an empty line or Ctrl-D ends it."""
    asyncio.run(_converse(None, False, conversation))


async def _converse(questions: list[str] | None, as_json: bool, conversation: str | None) -> None:
    from adapters.console.session import ConsoleSession
    from bot.runtime import opened

    s = state.settings
    if s.logging.level == "INFO":  # service logs would interleave with the answers on screen
        configure_logging(s.logging.model_copy(update={"level": "WARNING"}))
    async with opened(s) as rt:
        session = ConsoleSession(rt.engine(), out, conversation)
        if questions is not None:
            for question in questions:
                session.show(await session.ask(question), as_json)
            return
        while True:
            try:
                line = await asyncio.to_thread(out.input, "[bold]> [/bold]")
            except EOFError:
                break
            if not line.strip():
                break
            session.show(await session.ask(line), as_json)
