"""Cron's weekday numbering (0 and 7 Sunday), which APScheduler's own `from_crontab` reads as
Monday-based: a schedule for Mondays ran on Tuesdays."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from core.config_loader import load_settings
from core.cron import cron_trigger
from core.errors import ConfigError

A_THURSDAY = datetime(2026, 11, 26, tzinfo=UTC)
A_FORTNIGHT = 14


def _weekdays_run(expression: str) -> set[str]:
    """The weekdays a schedule fires on over a fortnight from a Thursday."""
    trigger, now, seen = cron_trigger(expression, UTC), A_THURSDAY, set()
    while (fire := trigger.get_next_fire_time(None, now)) and fire < A_THURSDAY + timedelta(
        days=A_FORTNIGHT
    ):
        seen.add(fire.strftime("%a"))
        now = fire + timedelta(minutes=1)
    return seen


@pytest.mark.parametrize(
    ("weekday", "days"),
    [
        ("1", {"Mon"}),
        ("0", {"Sun"}),
        ("7", {"Sun"}),
        ("MON", {"Mon"}),
        ("1-5", {"Mon", "Tue", "Wed", "Thu", "Fri"}),
        ("mon-fri", {"Mon", "Tue", "Wed", "Thu", "Fri"}),
        ("5-7", {"Fri", "Sat", "Sun"}),
        ("*/2", {"Sun", "Tue", "Thu", "Sat"}),
        ("1-5/2", {"Mon", "Wed", "Fri"}),
        ("1/3", {"Mon", "Thu", "Sun"}),  # an open step runs to 7, Sunday, as in cronie
        ("5/1", {"Fri", "Sat", "Sun"}),
        ("0,6", {"Sun", "Sat"}),
        ("*", {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}),
    ],
)
def test_weekdays_are_read_by_crons_numbering(weekday: str, days: set[str]) -> None:
    assert _weekdays_run(f"5 4 * * {weekday}") == days


@pytest.mark.parametrize(
    ("expression", "said"),
    [
        ("5 4 * * 8", "'8' is not a weekday"),
        ("5 4 * * 5-1", "'5-1': a range runs from an earlier day to a later one"),
        ("5 4 * * 1/0", "a step is 1 or more"),
        ("5 4 1 * 1", "set the day of the month or the weekday, not both"),
        ("5 4 * *", "a cron expression has 5 fields"),
    ],
)
def test_what_cron_would_read_otherwise_is_refused(expression: str, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        cron_trigger(expression, UTC)


def test_the_settings_refuse_it_when_they_load() -> None:
    with pytest.raises(ConfigError, match=r"keywords\.prune_schedule: not a valid cron expression"):
        load_settings(environ={"BOT_KEYWORDS__PRUNE_SCHEDULE": "0 3 1 * 1"})
    every_other_day = load_settings(environ={"BOT_KEYWORDS__PRUNE_SCHEDULE": "0 3 */2 * 1"})
    assert every_other_day.keywords.prune_schedule == "0 3 */2 * 1"  # "*": cron ANDs them too
