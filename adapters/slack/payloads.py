"""Reading Slack's payloads defensively: they are checked for the fields Bolt itself reads
(`server.py`, HTTP mode), but a listener reads more, and a field of another type than Slack
sends (null, a number, a list) must end in one warning, not a TypeError inside a listener that
has already posted a placeholder."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from slack_bolt.response import BoltResponse

log = structlog.get_logger(__name__)

# Slack names a direct message channel with a leading D (channels C, private groups G).
_DIRECT_MESSAGE = "D"


def is_direct_message(channel: str) -> bool:
    """A DM is answered whatever the channels' `trigger` (and updated so)."""
    return channel.startswith(_DIRECT_MESSAGE)


def is_direct_key(conversation_key: str) -> bool:
    """Whether a conversation key (`slack/TEAM/CHANNEL/...`) is a direct message's."""
    parts = conversation_key.split("/")
    return len(parts) > 2 and parts[0] == "slack" and is_direct_message(parts[2])


# An event's fields the listeners read as text, whenever present: Slack sends them as strings.
_EVENT_TEXT_FIELDS = ("user", "text", "channel", "ts", "thread_ts", "subtype", "bot_id")
# ... and as objects.
_EVENT_OBJECT_FIELDS = ("item", "context", "edited")


async def drop_malformed_events(
    body: dict[str, Any], next: Callable[[], Awaitable[None]]
) -> BoltResponse | None:
    """Bolt middleware: an event with a field of the wrong type is acknowledged (Slack would
    only send it again) and goes to no listener, with a warning naming the fields, never their
    values."""
    event = body.get("event")
    if isinstance(event, dict):
        wrong = [n for n in _EVENT_TEXT_FIELDS if n in event and not isinstance(event[n], str)]
        wrong += [n for n in _EVENT_OBJECT_FIELDS if n in event and not isinstance(event[n], dict)]
        if wrong:  # as good as missing: said as a missing field is (see app._has_fields)
            kind = event.get("type") if isinstance(event.get("type"), str) else "event"
            log.warning("slack_event_incomplete", platform="slack", payload=kind, missing=wrong)
            return BoltResponse(status=200, body="")
    await next()
    return None


def id_of(body: dict[str, Any], part: str) -> str:
    """`body[part]["id"]` (the team, channel or user of an interaction), or "" where the part is
    absent or null (Slack sends a null team for org-wide installs) or not what Slack sends."""
    found = body.get(part)
    value = found.get("id") if isinstance(found, dict) else None
    return value if isinstance(value, str) else ""


def team_of(body: dict[str, Any]) -> str:
    """The workspace an interaction came from, as Bolt's own `context.team_id` reads it: the
    payload's team, else its `team_id`, else the clicking user's team. An org-wide (Enterprise
    Grid) install sends a null team; read as "", the channel's key matched no channel's policy,
    and `private` or `trigger: off` no longer held there."""
    team = id_of(body, "team")
    if not team:
        found = body.get("team_id")
        user = body.get("user")
        if not isinstance(found, str) and isinstance(user, dict):
            found = user.get("team_id")
        team = found if isinstance(found, str) else ""
    return team


# What `app_context_changed` says is in view, most relevant first: a channel, or a message in one.
_CHANNEL_ENTITY = "slack#/types/channel_id"
_MESSAGE_ENTITY = "slack#/types/message_context"


def viewed_channel(context: object) -> tuple[str, str] | None:
    """(channel id, its team id or "") the agent pane's person is looking at, from the event's
    `context`: its `entities`, as Slack documents the event (`{"type": "slack#/types/
    channel_id", "value": "C…", "team_id": "T…"}`), or a `channel_id` as the earlier assistant
    events carried it. None when nothing in view is a channel (a canvas, a list, nothing)."""
    if not isinstance(context, dict):
        return None
    entities = context.get("entities")
    for entity in entities if isinstance(entities, list) else []:
        if not isinstance(entity, dict):
            continue
        value, team = entity.get("value"), entity.get("team_id")
        if entity.get("type") == _MESSAGE_ENTITY and isinstance(value, dict):
            value = value.get("channel_id")
        elif entity.get("type") != _CHANNEL_ENTITY:
            continue
        if isinstance(value, str) and value:
            return value, team if isinstance(team, str) else ""
    channel = context.get("channel_id")
    if isinstance(channel, str) and channel:
        team = context.get("team_id")
        return channel, team if isinstance(team, str) else ""
    return None
