"""What the bot must be allowed in a place before it pays a model to answer there.

Discord refuses a post the bot may not make (403, code 50013 Missing Permissions, or 160005 in a
locked thread) only once the answer is written: the answer is lost and its cost spent. The
permissions are known beforehand: an interaction carries the bot's (`app_permissions`), and
the gateway's cache holds a server's roles and overwrites for every other event. So each path
asks here first, and says what is missing where someone waits to hear it.
"""

from __future__ import annotations

import discord

# What an answer needs where it goes, by the permission's attribute and its name in Discord's
# settings (what a server admin looks for).
_READ = {"read_messages": "View Channel"}
_IN_THREAD = {
    "send_messages_in_threads": "Send Messages in Threads",
    "embed_links": "Embed Links",  # every answer is an embed
}
_OPEN_THREAD = {"create_public_threads": "Create Public Threads"}
# A reply to a message (the one asked about inside a thread: Discord's code 160002 without it).
_REPLY = {"read_message_history": "Read Message History"}
_LOCKED = {"manage_threads": "Manage Threads"}  # posts in a locked thread


def missing_permissions(
    permissions: discord.Permissions,
    place: discord.abc.GuildChannel | discord.Thread,
    *,
    reply: bool = False,
) -> list[str]:
    """The names of the permissions the bot lacks to answer in `place`: in the thread itself
    (as a reply to the message asked about, with `reply`), or, in a channel, in a thread it
    opens from a message there (the only way it answers in a channel with its own token).
    Empty when nothing is missing."""
    needed = {**_READ, **_IN_THREAD}
    if isinstance(place, discord.Thread):
        if reply:
            needed |= _REPLY
        if place.locked:
            needed |= _LOCKED
    else:
        needed |= _OPEN_THREAD
    return [name for attribute, name in needed.items() if not getattr(permissions, attribute)]


def known_missing(place: object, *, reply: bool = False) -> list[str]:
    """`missing_permissions` in `place` as the gateway's cache knows the bot's permissions
    there; empty when the cache can't tell (a direct message, a channel fetched over REST after
    a restart, a server not received yet): then Discord's answer to the post decides."""
    guild = getattr(place, "guild", None)
    me = getattr(guild, "me", None)
    if not isinstance(place, discord.abc.GuildChannel | discord.Thread) or me is None:
        return []
    if isinstance(place, discord.Thread) and place.parent is None:
        return []  # a thread's permissions are its parent's, not cached
    return missing_permissions(place.permissions_for(me), place, reply=reply)


def say_missing(missing: list[str]) -> str:
    """The missing permissions as a phrase: "the Embed Links permission", "the View Channel,
    Embed Links and Manage Threads permissions"."""
    if len(missing) == 1:
        return f"the {missing[0]} permission"
    return f"the {', '.join(missing[:-1])} and {missing[-1]} permissions"
