"""Text rules every part shares: shortening for display, and making untrusted text unable to
notify anyone."""

from __future__ import annotations

import re

ELLIPSIS = "…"
_PINGS = re.compile(
    # Slack (<!channel>, <!subteam^...>, <@U1|bob>, <#C1>) and Discord (<@1>, <@!1>, <@&1>,
    # <#1>) control sequences: anything in <...> that starts with @, # or !; and Discord's
    # clickable command mentions (</ask:123>), which offer to run a command.
    r"<[@#!][^<>\n]*>|</[^<>\n]*:\d+>|@(?=(?:everyone|here|channel)\b)",
    re.IGNORECASE,
)


def clip(text: str, limit: int, *, ellipsis: str = ELLIPSIS) -> str:
    """`text` on one line, cut at a word boundary to at most `limit` characters (the ellipsis
    included), so a snippet, quote or keyword never ends mid-word."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[: limit - len(ellipsis)].rsplit(" ", 1)[0] + ellipsis


def defuse_pings(text: str) -> str:
    """Remove platform mention syntax so untrusted text can never notify anyone. Repeated until
    nothing changes: removing `<!here>` from `<<!here>!channel>` must not leave `<!channel>`."""
    while True:
        defused = _PINGS.sub(lambda m: "@\u200b" if m.group(0) == "@" else "", text)
        if defused == text:
            return defused
        text = defused
