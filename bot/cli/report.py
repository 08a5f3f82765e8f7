"""`bot report`: what the bot answered, missed and stood on, from the answer log."""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from bot.cli.app import app, out, refuse, shown, state
from bot.cli.output_files import checked_output, write_output

if TYPE_CHECKING:
    from core.insights.report import Report
    from core.insights.stale import RecheckReport, StaleAnswer

_DURATION = re.compile(r"(\d+)([hdw])")
_SECONDS = {"h": 3_600, "d": 86_400, "w": 604_800}


def since_epoch(value: str, now: float) -> float:
    """`30d`, `12h`, `2w` back from now, or a date (`2026-11-01`, UTC); nothing before 1970,
    when no answer can have been logged (`99999999d` means everything, not a year out of
    range)."""
    if match := _DURATION.fullmatch(value.strip()):
        return max(0.0, now - int(match.group(1)) * _SECONDS[match.group(2)])
    try:
        day = datetime.strptime(value.strip(), "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        raise typer.BadParameter(
            f"{value!r}: give a duration (30d, 12h, 2w) or a date (2026-11-01)"
        ) from None
    return max(0.0, day.timestamp())


@app.command()
def report(
    since: Annotated[
        str, typer.Option(help="How far back: 30d, 12h, 2w, or a date (2026-11-01).")
    ] = "30d",
    channel: Annotated[
        str | None,
        typer.Option(
            help="One channel: its key (slack/TEAM/CHANNEL, discord/GUILD/CHANNEL) or id."
        ),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html", help="Write the report as one HTML file here.", callback=checked_output
        ),
    ] = None,
    json_path: Annotated[
        Path | None,
        typer.Option("--json", help="Write the figures as JSON here.", callback=checked_output),
    ] = None,
) -> None:
    """Questions per day and channel, outcomes, feedback, verified quotes, latency and cost,
    knowledge gaps (what the docs could not answer, grouped by meaning) and sources."""
    now = time.time()
    start = since_epoch(since, now)
    if start >= now:
        refuse(f"--since {since} is not in the past")
    result = asyncio.run(_report(start, now, channel))
    _print(result)
    if json_path is not None:
        write_output(json_path, json.dumps(asdict(result), indent=2, ensure_ascii=False) + "\n")
    if html is not None:
        from core.insights.html import render_html

        write_output(html, render_html(result))


async def _report(since: float, until: float, channel: str | None) -> Report:
    from bot.runtime import opened
    from core.insights.report import build_report

    s = state.settings
    async with opened(s) as rt:
        log = rt.backend.platform_state(s.slack.dedup_ttl_s, s.insights.store_questions)
        return await build_report(
            log.answer_log_pages(since, s.insights.log_page_size),
            since=since,
            until=until,
            channel=channel,
            settings=s.insights,
            embedder=rt.embedder,
            index=rt.backend.index,
            learned=await rt.backend.keywords.documents(),
            direct=is_direct,
        )


def is_direct(conversation_key: str) -> bool:
    """A direct message's conversation, as each platform keys one."""
    from adapters.discord.components import is_direct_key as discord_direct
    from adapters.slack.payloads import is_direct_key as slack_direct

    return slack_direct(conversation_key) or discord_direct(conversation_key)


def _print(r: Report) -> None:
    """Every text from the log (questions, gap names, the channel asked for) goes in as
    `shown`: never read as markup, without what a terminal acts on."""
    where = f", channel {r.channel}" if r.channel else ""
    table = Table("", "", title=shown(f"{r.since} to {r.until}{where}: {r.answers} questions"))
    for status, count in r.statuses.items():
        table.add_row(status, f"{count} ({r.rates[status]:.0%})")
    table.add_row("held back", f"{r.abstained} ({r.rates['abstained']:.0%})")
    table.add_row("feedback", f"👍 {r.up_votes}  👎 {r.down_votes}")
    table.add_row("quotes verified", f"{r.quotes_verified} of {r.quotes}")
    if r.latency_p50_s is not None and r.latency_p95_s is not None:
        table.add_row("latency", f"p50 {r.latency_p50_s:.2f} s, p95 {r.latency_p95_s:.2f} s")
    if r.cost_usd is not None:
        table.add_row("cost", f"${r.cost_usd:.2f}")
    out.print(table)
    if r.gaps:
        gaps = Table("gap", "questions", "example", title="Knowledge gaps")
        for gap in r.gaps:
            example = gap.examples[0] if gap.examples else ""
            gaps.add_row(shown(gap.label), str(gap.size), shown(example))
        out.print(gaps)
    for left_out in r.gaps_left_out():
        out.print(shown(left_out), soft_wrap=True)
    if unmatched := r.unmatched_channel():
        out.print(shown(unmatched, style="yellow"), soft_wrap=True)


@app.command("stale-answers")
def stale_answers_command(
    since: Annotated[
        str, typer.Option(help="How far back: 180d, 2w, or a date (2026-11-01).")
    ] = "180d",
    notify: Annotated[
        bool,
        typer.Option(
            "--notify",
            help="Re-ask each one (once) and post the new answer in its thread where it differs.",
        ),
    ] = False,
) -> None:
    """Answers whose cited passages changed or went since they were given (after an ingest)."""
    now = time.time()
    found, rechecked = asyncio.run(_stale(since_epoch(since, now), notify))
    table = Table("answered", "question", "what changed", title=f"{len(found)} stale answers")
    for item in found:
        changes = "; ".join(f"{c.change}: {c.title or c.url}" for c in item.changes)
        when = datetime.fromtimestamp(item.entry.at, UTC).strftime("%Y-%m-%d")
        table.add_row(when, shown(item.entry.question), shown(changes))
    out.print(table)
    if rechecked is not None:
        out.print(
            f"re-asked: {len(rechecked.posted)} updated in their threads, "
            f"{len(rechecked.unchanged)} unchanged, {len(rechecked.not_grounded)} without a "
            f"grounded answer, {len(rechecked.undeliverable)} with no thread to post in, "
            f"{len(rechecked.silenced)} where the bot is switched off, "
            f"{rechecked.already_checked} re-checked before"
        )
        failed, refused = len(rechecked.failed), len(rechecked.refused)
        if failed or refused:
            # As `bot sync` does: what was done stands, and the exit says not all of it was.
            refuse(
                f"not every update was posted: {failed} failed for now (the next run tries "
                f"again), {refused} refused for good (the channel gone, archived or closed to "
                "the bot); the log's update_not_posted lines say why"
            )


async def _stale(since: float, notify: bool) -> tuple[list[StaleAnswer], RecheckReport | None]:
    from bot.runtime import opened
    from bot.wiring import notifiers
    from core.insights.stale import recheck, stale_answers

    s = state.settings
    async with opened(s) as rt:
        log = rt.backend.platform_state(s.slack.dedup_ttl_s, s.insights.store_questions)
        found = await stale_answers(await log.answer_log(since), rt.backend.index)
        if not notify:
            return found, None
        async with notifiers(s) as available:
            if not available:
                refuse("--notify needs SLACK_BOT_TOKEN or DISCORD_TOKEN to post the updates")
            return found, await recheck(found, rt.engine(), log, available)
