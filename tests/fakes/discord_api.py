"""A local Discord REST emulator (aiohttp) for the real discord.py HTTP client and webhook
adapter: both are pointed at it through their `Route.BASE`. It answers the calls the bot makes
and records them."""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

from aiohttp import web

BOT_ID = "900"
APP_ID = "800"
GUILD_ID = "500"
CHANNEL_ID = "600"
FORUM_ID = "650"  # a forum channel, with a "Solved" tag
NOW = "2026-11-22T00:00:00.000000+00:00"


def user(user_id: str, name: str, bot: bool = False) -> dict[str, Any]:
    return {
        "id": user_id,
        "username": name,
        "discriminator": "0",
        "global_name": name,
        "avatar": None,
        "bot": bot,
    }


def message(
    message_id: str,
    channel_id: str,
    author: dict[str, Any],
    content: str = "",
    embeds: list[Any] | None = None,
    guild_id: str | None = None,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": message_id,
        "channel_id": channel_id,
        "author": author,
        "content": content,
        "timestamp": NOW,
        "edited_timestamp": None,
        "tts": False,
        "mention_everyone": False,
        "mentions": [],
        "mention_roles": [],
        "attachments": [],
        "embeds": embeds or [],
        "pinned": False,
        "type": 0,
        "flags": 0,
        "components": [],
    }
    if guild_id:
        data["guild_id"] = guild_id
    return data


_REFUSALS = {
    50001: "Missing Access",
    50013: "Missing Permissions",
    50083: "Thread is archived",
    160005: "Thread is locked",
}


def _json(payload: Any, status: int = 200) -> web.Response:
    # discord.py parses a body as JSON only when the content type is exactly this, no charset.
    return web.Response(
        status=status,
        body=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json"},
    )


class DiscordEmulator:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []  # (method, path, json body)
        self.times: list[float] = []  # time.perf_counter() of each call, in order
        self.refuse_threads: int | None = None  # an HTTP status to answer thread creation with
        # (HTTP status, Discord error code) to answer message posts with, in order; None: that
        # post is answered as usual
        self.message_failures: list[tuple[int, int] | None] = []
        # Channels whose lookup (GET /channels/{id}) Discord refuses: access lost, an outage.
        self.hidden_channels: set[str] = set()
        # (HTTP status, Discord error code) to answer every call on an interaction's webhook
        # with (follow-ups, the original response): what Discord answers once the 15-minute
        # interaction token has expired, (401, 50027), or the webhook is gone, (404, 10015)
        self.webhook_refusal: tuple[int, int] | None = None
        # (HTTP status, Discord error code) to answer a channel's edit with: (403, 50013) is a
        # bot without Manage Threads tagging or locking a forum post
        self.channel_edit_refusal: tuple[int, int] | None = None
        # Per channel id, (HTTP status, Discord error code) to answer its message posts with:
        # (403, 50013) Missing Permissions (no Send Messages in Threads in a thread, no Embed
        # Links for a post with embeds, in `refuse_embeds`), (403, 50001) Missing Access, (403,
        # 160005) a locked thread; and its message reads with (`refuse_reads`: no View Channel)
        self.refuse_posts: dict[str, tuple[int, int]] = {}
        self.refuse_embeds: set[str] = set()
        self.refuse_reads: dict[str, tuple[int, int]] = {}
        # (HTTP status, code) to answer an interaction's first response with: (400, 50083), a
        # command in a locked, archived thread
        self.callback_refusal: tuple[int, int] | None = None
        self.history: list[dict[str, Any]] = []  # a channel's messages, oldest first
        self.threads: list[str] = []  # ids of the threads created
        self.thread_names: dict[str, str] = {}
        self.messages: dict[str, dict[str, Any]] = {}  # by id, for GET .../messages/{id}
        self.forum_posts: dict[str, dict[str, Any]] = {}  # thread id -> owner_id, name, tags
        self._ids = itertools.count(10_000)
        self.app = web.Application()
        self.app.router.add_route("*", "/api/v10/{tail:.*}", self._handle)

    def _thread(self, thread_id: str) -> dict[str, Any]:
        return {
            "id": thread_id,
            "type": 11,
            "guild_id": GUILD_ID,
            "parent_id": CHANNEL_ID,
            "name": self.thread_names.get(thread_id, ""),
            "owner_id": BOT_ID,
            "thread_metadata": {
                "archived": False,
                "auto_archive_duration": 1440,
                "archive_timestamp": NOW,
                "locked": False,
            },
            "message_count": 0,
            "member_count": 1,
            "rate_limit_per_user": 0,
            "flags": 0,
        }

    def _forum(self) -> dict[str, Any]:
        return {
            **self._text_channel(),
            "id": FORUM_ID,
            "type": 15,
            "name": "help-forum",
            "available_tags": [
                {
                    "id": "901",
                    "name": "Solved",
                    "moderated": False,
                    "emoji_id": None,
                    "emoji_name": None,
                },
                {
                    "id": "902",
                    "name": "Bug",
                    "moderated": False,
                    "emoji_id": None,
                    "emoji_name": None,
                },
            ],
        }

    def _forum_post(self, thread_id: str) -> dict[str, Any]:
        post = self.forum_posts[thread_id]
        data = self._thread(thread_id)
        data.update(
            parent_id=FORUM_ID,
            owner_id=post["owner_id"],
            name=post["name"],
            applied_tags=post.get("applied_tags", []),
        )
        data["thread_metadata"]["locked"] = post.get("locked", False)
        return data

    def _text_channel(self) -> dict[str, Any]:
        return {
            "id": CHANNEL_ID,
            "type": 0,
            "guild_id": GUILD_ID,
            "name": "help",
            "position": 0,
            "permission_overwrites": [],
            "nsfw": False,
            "parent_id": None,
            "topic": None,
            "last_message_id": None,
            "rate_limit_per_user": 0,
            "flags": 0,
        }

    def _refusal(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, int] | None:
        """What Discord answers a call the bot may not make here (the `refuse_*` settings)."""
        if path.endswith("/callback"):
            return self.callback_refusal
        parts = path.split("/")  # "", "channels", id, "messages"[, message id]
        if len(parts) < 4 or parts[1] != "channels" or parts[3] != "messages":
            return None
        channel = parts[2]
        if method == "GET":
            return self.refuse_reads.get(channel)
        if method != "POST" or len(parts) != 4:
            return None
        if channel in self.refuse_embeds and body.get("embeds"):
            return (403, 50013)
        return self.refuse_posts.get(channel)

    def called(self, method: str, fragment: str) -> list[Any]:
        return [body for m, path, body in self.calls if m == method and fragment in path]

    async def _handle(self, request: web.Request) -> web.Response:
        path = "/" + request.match_info["tail"]
        body: Any = None
        if request.can_read_body:
            if request.content_type == "application/json":
                body = await request.json()
            elif request.content_type.startswith("multipart/"):
                reader = await request.multipart()
                part = await reader.next()
                body = await part.json() if part is not None else None  # type: ignore[union-attr]
        self.calls.append((request.method, path, body))
        self.times.append(time.perf_counter())
        return self._answer(request.method, path, body or {})

    def _answer(self, method: str, path: str, body: dict[str, Any]) -> web.Response:
        me = user(BOT_ID, "docbot", bot=True)
        posted = body if method in ("POST", "PATCH") and isinstance(body, dict) else {}
        embeds = posted.get("embeds") or (posted.get("data") or {}).get("embeds") or []
        if problem := _embed_problem(embeds):
            # What Discord answers a message over its embed limits: the whole message refused.
            return _json({"message": f"Invalid Form Body ({problem})", "code": 50035}, status=400)
        if refusal := self._refusal(method, path, posted):
            status, code = refusal
            return _json({"message": _REFUSALS.get(code, "Refused"), "code": code}, status=status)
        if path == "/users/@me":
            return _json(me)
        if path == "/oauth2/applications/@me":
            return _json(
                {
                    "id": APP_ID,
                    "name": "Docs",
                    "description": "",
                    "icon": None,
                    "bot_public": True,
                    "bot_require_code_grant": False,
                    "verify_key": "00",
                    "flags": 0,
                    "owner": user("1", "owner"),
                    "team": None,
                    "summary": "",
                    "rpc_origins": [],
                }
            )
        if path.endswith("/callback"):
            interaction_id = path.split("/")[2]
            return _json(
                {
                    "interaction": {
                        "id": interaction_id,
                        "type": 2,
                        "response_message_loading": body.get("type") == 5,
                        "response_message_ephemeral": False,
                    },
                    "resource": {"type": body.get("type", 4)},
                }
            )
        if method == "PATCH" and path.startswith("/channels/") and self.channel_edit_refusal:
            status, code = self.channel_edit_refusal
            return _json({"message": "Missing Permissions", "code": code}, status=status)
        if path.startswith("/webhooks/") and self.webhook_refusal is not None:
            status, code = self.webhook_refusal
            return _json({"message": "Invalid Webhook Token", "code": code}, status=status)
        if path.startswith("/webhooks/") and method == "POST":
            return _json(
                message(
                    str(next(self._ids)),
                    CHANNEL_ID,
                    me,
                    body.get("content", ""),
                    body.get("embeds"),
                )
            )
        if path.endswith("/messages/@original"):
            return _json(message(str(next(self._ids)), CHANNEL_ID, me, guild_id=GUILD_ID))
        if path.endswith("/threads") and method == "POST":
            if self.refuse_threads:
                return _json(
                    {"message": "Missing Permissions", "code": 50013}, status=self.refuse_threads
                )
            in_channel = path.split("/")[2]
            if "/messages/" in path and (
                in_channel in self.threads or in_channel in self.forum_posts
            ):
                # Discord opens no thread from a message that is itself in a thread.
                return _json(
                    {"message": "Cannot execute action on this channel type", "code": 50024},
                    status=400,
                )
            # A thread started from a message takes the message's id, so there is at most one.
            from_message = path.split("/messages/")[1].split("/")[0] if "/messages/" in path else ""
            if from_message in self.threads:
                return _json(
                    {
                        "message": "A thread has already been created for this message",
                        "code": 160004,
                    },
                    status=400,
                )
            thread_id = from_message or str(next(self._ids))
            self.threads.append(thread_id)
            self.thread_names[thread_id] = body.get("name", "")
            return _json(self._thread(thread_id))
        if method == "GET" and path.startswith("/channels/") and path.count("/") == 2:
            thread_id = path.split("/")[2]
            if thread_id in self.hidden_channels:
                return _json({"message": "Missing Access", "code": 50001}, status=403)
            if thread_id in self.threads:
                return _json(self._thread(thread_id))
            if thread_id == CHANNEL_ID:
                return _json(self._text_channel())
            if thread_id == FORUM_ID:
                return _json(self._forum())
            if thread_id in self.forum_posts:
                return _json(self._forum_post(thread_id))
            return _json({"message": "Unknown Channel", "code": 10003}, status=404)

        if method == "PATCH" and path.startswith("/channels/") and path.count("/") == 2:
            post = self.forum_posts.get(path.split("/")[2])
            if post is None:
                return _json({"message": "Unknown Channel", "code": 10003}, status=404)
            post.update({k: v for k, v in body.items() if k in ("applied_tags", "locked")})
            return _json(self._forum_post(path.split("/")[2]))
        if "/commands" in path and method == "PUT":
            return _json(
                [
                    {
                        "description": "",  # context-menu commands have none; Discord sends ""
                        **c,
                        "id": str(next(self._ids)),
                        "application_id": APP_ID,
                        "version": "1",
                        "default_member_permissions": None,
                    }
                    for c in body or []
                ]
            )
        if path.endswith("/typing"):
            return web.Response(status=204)
        if method == "GET" and path.startswith("/channels/") and "/messages/" in path:
            found = self.messages.get(path.rsplit("/", 1)[-1])
            if found is None:
                return _json({"message": "Unknown Message", "code": 10008}, status=404)
            return _json(found)
        if path.startswith("/channels/") and path.endswith("/messages"):
            if method == "GET":  # newest first, as Discord answers `before=` queries
                return _json(list(reversed(self.history)))
            failure = self.message_failures.pop(0) if self.message_failures else None
            if failure is not None:
                status, code = failure
                return _json({"message": "emulated failure", "code": code}, status=status)
            channel_id = path.split("/")[2]
            return _json(
                message(
                    str(next(self._ids)),
                    channel_id,
                    me,
                    body.get("content", ""),
                    body.get("embeds"),
                )
            )
        return _json({"message": f"emulator: no route {method} {path}"}, status=404)


# Discord's documented embed limits: per field, and for all of one message's embeds together.
_EMBED_FIELD_LIMITS = {"title": 256, "description": 4096}
_FIELD_NAME_CHARS, _FIELD_VALUE_CHARS, _FOOTER_CHARS = 256, 1024, 2048
_MESSAGE_EMBEDS, _MESSAGE_EMBED_CHARS = 10, 6000


def _embed_problem(embeds: list[dict[str, Any]]) -> str | None:
    if len(embeds) > _MESSAGE_EMBEDS:
        return f"{len(embeds)} embeds"
    total = 0
    for embed in embeds:
        for key, limit in _EMBED_FIELD_LIMITS.items():
            if len(embed.get(key) or "") > limit:
                return f"embed {key} over {limit}"
        for field in embed.get("fields") or []:
            if len(field["name"]) > _FIELD_NAME_CHARS or len(field["value"]) > _FIELD_VALUE_CHARS:
                return "embed field over its limit"
            total += len(field["name"]) + len(field["value"])
        footer = (embed.get("footer") or {}).get("text") or ""
        if len(footer) > _FOOTER_CHARS:
            return "embed footer over 2048"
        total += len(embed.get("title") or "") + len(embed.get("description") or "") + len(footer)
    if total > _MESSAGE_EMBED_CHARS:
        return f"embed size {total} exceeds the maximum of {_MESSAGE_EMBED_CHARS}"
    return None
