"""Cron expressions as people write them, read the way cron reads them.

APScheduler 3's `CronTrigger.from_crontab` passes the weekday field through as its own
`day_of_week`, which counts from Monday (0 = Monday) and stops at 6, where cron counts from
Sunday (0 and 7 = Sunday): `* * * * 1`, "Mondays", would run on Tuesdays, and `7` would be
refused. So the weekday field is read here, by cron's numbering, and handed to APScheduler
as day names. Cron also runs a job whose day of the month and weekday are both restricted
when *either* matches, and APScheduler only when both do: such an expression is refused
rather than silently read another way.
"""

from __future__ import annotations

import re
from datetime import tzinfo
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from apscheduler.triggers.cron import CronTrigger

CRON_FIELDS = 5  # minute hour day month weekday
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_SUNDAY_AGAIN = 7  # cron's second number for Sunday
_PART = re.compile(r"(?P<range>\*|(?P<first>\w+)(?:-(?P<last>\w+))?)(?:/(?P<step>\d+))?")


def _day(name: str) -> int:
    """A weekday by cron's number (0-7: 0 and 7 are Sunday) or English abbreviation."""
    if name.isdigit() and int(name) <= _SUNDAY_AGAIN:
        return int(name)
    if name.lower() in _DAYS:
        return _DAYS.index(name.lower())
    raise ValueError(f"{name!r} is not a weekday: 0-7 (0 and 7 are Sunday) or sun-sat")


def _weekdays(field: str) -> str:
    """Cron's weekday field as APScheduler's day names (`*` as it is)."""
    if field == "*":
        return field
    days: set[int] = set()
    for part in field.split(","):
        match = _PART.fullmatch(part)
        if match is None:
            raise ValueError(f"{part!r} is not a weekday, a range or a step")
        step = int(match["step"] or 1)
        if step < 1:
            raise ValueError(f"{part!r}: a step is 1 or more")
        saturday = len(_DAYS) - 1
        if match["range"] == "*":
            first, last = 0, saturday
        else:
            first = _day(match["first"])
            # An open step (`1/3`) runs to cron's last day, 7 (Sunday again), as cronie reads it.
            open_end = _SUNDAY_AGAIN if match["step"] else first
            last = _day(match["last"]) if match["last"] else open_end
            if last < first:
                raise ValueError(f"{part!r}: a range runs from an earlier day to a later one")
        days.update(day % _SUNDAY_AGAIN for day in range(first, last + 1, step))
    return ",".join(_DAYS[day] for day in sorted(days))


def cron_trigger(expression: str, timezone: tzinfo) -> CronTrigger:
    """The trigger for a 5-field cron expression, weekdays by cron's numbering. ValueError
    (with what is wrong) for anything cron would not run as written."""
    from apscheduler.triggers.cron import CronTrigger  # 0.1 s, and only when a schedule is set

    fields = expression.split()
    if len(fields) != CRON_FIELDS:
        raise ValueError("a cron expression has 5 fields: minute hour day month weekday")
    minute, hour, day, month, weekday = fields
    # Cron ORs the two only when neither starts with "*" (`*/2` included); otherwise it ANDs
    # them, as APScheduler always does.
    if not day.startswith("*") and not weekday.startswith("*"):
        raise ValueError(
            "set the day of the month or the weekday, not both: cron runs on either, "
            "this scheduler only on both"
        )
    return CronTrigger(
        minute=minute,
        hour=hour,
        day=day,
        month=month,
        day_of_week=_weekdays(weekday),
        timezone=timezone,
    )
