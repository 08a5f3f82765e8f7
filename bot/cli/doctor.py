"""`bot doctor`: what the settings make of the bot, and whether its parts are reachable."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from bot.diagnostics import Check

from bot.cli.app import app, out, refuse, shown, state


@app.command()
def doctor(
    channel: Annotated[
        str | None,
        typer.Option(
            help="Also show the policy of this channel, by its key: slack/TEAM/CHANNEL or "
            "discord/GUILD/CHANNEL (ids as Slack and Discord show them).",
        ),
    ] = None,
) -> None:
    """Check the backend (reachable, versions, licence, index) and say which model answers,
    which platform tokens are set and whether the web is searched."""

    from core.config import CHANNEL_FORMS, is_channel_prefix
    from core.domain.urls import redact_urls_in

    if channel is not None and not is_channel_prefix(channel):
        refuse(f"{channel!r} is not a channel key: use {CHANNEL_FORMS}, with ids, not names")
    checks = asyncio.run(_doctor(channel))
    table = Table("check", "status", "detail", title=f"backend: {state.settings.search.backend}")
    for check in checks:
        status = (
            Text("FAIL", style="red")
            if not check.ok
            else Text("info")
            if check.info
            else Text("ok", style="green")
        )
        # Any URL a message quotes (a client library's error) is shown without credentials;
        # names and details quote settings, sources and servers: never read as markup.
        table.add_row(shown(check.name), status, shown(redact_urls_in(check.detail)))
    out.print(table)
    if not all(c.ok for c in checks):
        raise typer.Exit(1)


async def _doctor(channel: str | None) -> list[Check]:
    from bot.diagnostics import Check, channel_policy, configuration, diagnose, model_tools
    from bot.wiring import build_embedder, open_backend
    from core.errors import SearchIndexError

    s = state.settings
    embedder = build_embedder(s)
    try:
        backend = await open_backend(s, embedder, check_compatible=False)
    except SearchIndexError as exc:
        # The backend names what failed when it knows (a refused mapping is no connection).
        name = exc.check or ("index" if s.search.backend == "sqlite" else "connection")
        failed = Check(name, False, str(exc))
        policy = [] if channel is None else [channel_policy(s, channel, None)]
        return [failed, *configuration(s), *policy]
    try:
        return [
            *await diagnose(backend, s, channel),
            *configuration(s),
            *await model_tools(s, backend),
        ]
    finally:
        await backend.close()
