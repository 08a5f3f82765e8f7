"""`bot slack` and `bot discord`: the long-running platform processes."""

from __future__ import annotations

import asyncio
import os
import re
import signal
from typing import TYPE_CHECKING, Annotated

import typer

from core.config import Settings
from core.errors import ConfigError

if TYPE_CHECKING:
    from adapters.discord.bot import DocsBot
    from core.search.embedder import CachedEmbedder

from bot.cli.app import app, err, out, state

# The last TCP port; 0 asks the system for any free one.
MAX_PORT = 65_535
_PORT_NUMBER = re.compile(r"[0-9]{1,5}")


@app.command()
def slack(
    socket: Annotated[
        bool, typer.Option("--socket", help="Socket Mode (needs SLACK_APP_TOKEN).")
    ] = False,
    http: Annotated[
        bool, typer.Option("--http", help="HTTP mode: POST /slack/events, GET /healthz.")
    ] = False,
    port: Annotated[
        int | None,
        typer.Option(
            min=0, max=MAX_PORT, help="HTTP port (default: $PORT, else slack.port; 0: any free)."
        ),
    ] = None,
) -> None:
    """Run the Slack bot: @mentions answered in threads, follow-ups, DMs."""
    if socket == http:
        err.print("error: choose exactly one of --socket and --http", soft_wrap=True)
        raise typer.Exit(2)
    # A wrong $PORT is told before the model loads, not after.
    listen = None if socket else _http_port(port, state.settings.slack.port)
    asyncio.run(_run_slack(listen))


def _http_port(option: int | None, setting: int) -> tuple[int, str]:
    """The port HTTP mode listens on, and where it was set (a failure to listen names it):
    `--port` (typer checks its range), else `$PORT` (the platform's router sends there),
    else `slack.port` (checked with the settings)."""
    if option is not None:
        return option, "--port"
    given = os.environ.get("PORT", "")
    if not given:
        return setting, "slack.port"
    if not _PORT_NUMBER.fullmatch(given) or int(given) > MAX_PORT:
        raise ConfigError(
            f"PORT={given!r} is not a port number: set PORT to one from 0 to {MAX_PORT}, "
            "or unset it to use slack.port"
        )
    return int(given), "PORT"


async def _server_embedder(s: Settings) -> CachedEmbedder:
    """The embedder of a long-running process, its model loaded before it listens: a broken
    model stops it at start instead of failing every question, and the first question does
    not pay for the load."""
    from bot.wiring import build_embedder

    embedder = build_embedder(s)
    await embedder.warm_up()
    return embedder


async def _run_slack(listen: tuple[int, str] | None) -> None:
    """Serve until SIGTERM or SIGINT, then let the answers in progress finish (or apologise in
    their threads) and return: the process exits 0, like `bot discord` and `bot clock`.
    `listen`: HTTP mode's port and where it was set; None: Socket Mode."""
    from adapters.slack.server import run_http, run_socket_mode
    from bot.diagnostics import ReadinessProbe
    from bot.runtime import opened
    from bot.unset_secrets import missing_secret
    from bot.wiring import build_slack_app, metrics_server

    s = state.settings
    app_token = s.secrets.slack_app_token
    if listen is None and app_token is None:
        raise missing_secret("SLACK_APP_TOKEN", "for Socket Mode")
    async with opened(s, embedder=await _server_embedder(s)) as rt:
        platform = rt.backend.platform_state(s.slack.dedup_ttl_s, s.insights.store_questions)
        conversations = rt.backend.conversations
        service = build_slack_app(
            s,
            rt.engine(chat=True),
            conversations,
            platform,
            embedder=rt.embedder,
            socket_mode=listen is None,
            readiness=ReadinessProbe(rt.backend.index, s.slack.readiness_cache_s),
        )
        if listen is None:
            assert app_token is not None  # checked above
            async with metrics_server(s, service.readiness) as url:  # no HTTP server of its own
                if url:
                    out.print(f"Metrics at {url}")
                await run_socket_mode(service, app_token.get_secret_value(), out.print)
        else:
            port, port_setting = listen
            await run_http(service, s.slack.host, port, port_setting, out.print)


discord_app = typer.Typer(help="The Discord bot.", invoke_without_command=True)
app.add_typer(discord_app, name="discord")


@discord_app.callback()
def discord_run(ctx: typer.Context) -> None:
    """Run the Discord bot (the Procfile's worker): /ask, threads, follow-ups."""
    if ctx.invoked_subcommand is None:
        asyncio.run(_run_discord(sync_guild=None, sync_only=False))


@discord_app.command("sync")
def discord_sync(
    guild: Annotated[
        int | None, typer.Option(help="Register in one server only (instant; for testing).")
    ] = None,
) -> None:
    """Register /ask and the "Ask the docs about this" message menu with Discord. Run on
    deploy, not on every start."""
    asyncio.run(_run_discord(sync_guild=guild, sync_only=True))


async def _run_discord(sync_guild: int | None, sync_only: bool) -> None:
    from adapters.discord.startup import explained_connection_failures
    from bot.diagnostics import ReadinessProbe
    from bot.runtime import opened
    from bot.wiring import build_discord_bot, discord_token, metrics_server

    s = state.settings
    token = discord_token(s)
    async with opened(s, embedder=await _server_embedder(s)) as rt:
        platform = rt.backend.platform_state(s.discord.dedup_ttl_s, s.insights.store_questions)
        bot = build_discord_bot(
            s, rt.engine(chat=True), rt.backend.conversations, platform, embedder=rt.embedder
        )
        try:
            with explained_connection_failures():
                if sync_only:
                    out.print(await bot.sync_commands(token, sync_guild))
                else:
                    index_ready = ReadinessProbe(rt.backend.index, s.slack.readiness_cache_s)

                    async def ready() -> str | None:
                        return bot.not_ready() or await index_ready()

                    async with metrics_server(s, ready) as url:
                        if url:
                            out.print(f"Metrics at {url}")
                        await _serve_discord(bot, token)
        finally:
            await bot.close()


async def _serve_discord(bot: DocsBot, token: str) -> None:
    """Until SIGTERM or SIGINT, which let the answers in progress finish (or apologise for
    them) before closing the connection (`DocsBot.shutdown`); `start` returns then."""
    loop = asyncio.get_running_loop()
    stopping: list[asyncio.Task[None]] = []  # kept: the loop holds only a weak reference

    def stop() -> None:
        if not stopping:  # a second signal changes nothing: the drain has its own deadlines
            stopping.append(asyncio.ensure_future(bot.shutdown()))

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop)
    await bot.start(token, reconnect=True)
    if stopping:
        await stopping[0]
