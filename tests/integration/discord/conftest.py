"""A real discord.py client whose REST and webhook traffic goes to the local Discord emulator;
gateway events are raw payloads handed to its connection state, as the gateway would."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import discord
import discord.webhook.async_
import pytest
from aiohttp.test_utils import TestServer

from adapters.discord.bot import DocsBot
from bot.wiring import build_discord_bot
from core.answer.claude import ClaudeModel
from core.backends.sqlite.conversation_store import SqliteConversationStore
from core.backends.sqlite.platform_state import SqlitePlatformState
from core.config import ChannelPolicy, ChannelSettings, Settings
from core.ports import PlatformState
from core.search.embedder import MiniLMEmbedder
from tests.fakes.discord_api import (
    APP_ID,
    CHANNEL_ID,
    GUILD_ID,
    NOW,
    DiscordEmulator,
    message,
    user,
)
from tests.integration.answers.helpers import kb_engine, poll_until

_ids = itertools.count(1_000_000)


def ask_payload(
    question: str,
    *,
    channel_type: int = 0,
    guild: bool = True,
    thread: str | None = None,
    parent: str = CHANNEL_ID,
) -> dict[str, Any]:
    """A `/ask` interaction in the test channel, in a DM (`guild=False`), or inside `thread`
    (a public thread of `parent`, as Discord describes the channel of a command run there)."""
    asker = user("42", "alice")
    payload: dict[str, Any] = {
        "id": str(next(_ids)),
        "application_id": APP_ID,
        "type": 2,
        "token": "interaction-token",
        "version": 1,
        "channel_id": CHANNEL_ID,
        "channel": {
            "id": CHANNEL_ID,
            "type": channel_type,
            "name": "general",
            "position": 0,
            "permission_overwrites": [],
            "nsfw": False,
            "parent_id": None,
        },
        "data": {
            "id": "700",
            "name": "ask",
            "type": 1,
            "options": [{"name": "question", "type": 3, "value": question}],
        },
        "locale": "en-US",
        "entitlements": [],
        "attachment_size_limit": 8_388_608,
        "authorizing_integration_owners": {},
        "app_permissions": "2248473465835073",
    }
    if guild:
        payload["guild_id"] = GUILD_ID
        payload["guild_locale"] = "en-US"
        payload["channel"]["guild_id"] = GUILD_ID
        payload["member"] = {
            "user": asker,
            "roles": [],
            "joined_at": NOW,
            "deaf": False,
            "mute": False,
            "permissions": "2248473465835073",
            "flags": 0,
        }
    else:
        payload["user"] = asker
        payload["channel"] = {"id": CHANNEL_ID, "type": 1, "recipients": [asker]}
    if thread is not None:
        payload["channel_id"] = thread
        payload["channel"] = {
            "id": thread,
            "type": 11,  # PUBLIC_THREAD (a forum post is one too)
            "guild_id": GUILD_ID,
            "parent_id": parent,
            "name": "a thread",
            "owner_id": "42",
            "flags": 0,
            "rate_limit_per_user": 0,
            "message_count": 2,
            "member_count": 2,
            "thread_metadata": {
                "archived": False,
                "auto_archive_duration": 1440,
                "archive_timestamp": NOW,
                "locked": False,
            },
        }
    return payload


def click_payload(custom_id: str) -> dict[str, Any]:
    clicker = user("43", "bob")
    return {
        "id": str(next(_ids)),
        "application_id": APP_ID,
        "type": 3,
        "token": "click-token",
        "version": 1,
        "guild_id": GUILD_ID,
        "channel_id": CHANNEL_ID,
        "channel": {
            "id": CHANNEL_ID,
            "type": 0,
            "guild_id": GUILD_ID,
            "name": "general",
            "position": 0,
            "permission_overwrites": [],
            "nsfw": False,
        },
        "member": {
            "user": clicker,
            "roles": [],
            "joined_at": NOW,
            "deaf": False,
            "mute": False,
            "permissions": "2248473465835073",
            "flags": 0,
        },
        # Discord sends the clicked message with its components, as the bot posted them.
        "message": {
            **message("555", CHANNEL_ID, user("900", "docbot", bot=True)),
            "components": [
                {
                    "type": 1,
                    "components": [
                        {"type": 2, "style": 2, "label": "vote", "custom_id": custom_id}
                    ],
                }
            ],
        },
        "data": {"custom_id": custom_id, "component_type": 2},
        "locale": "en-US",
        "guild_locale": "en-US",
        "entitlements": [],
        "attachment_size_limit": 8_388_608,
        "authorizing_integration_owners": {},
    }


def modal_submit(custom_id: str, reason: str, note: str) -> dict[str, Any]:
    """The reason form sent back: a select and a text input, each inside a label."""
    payload = click_payload(custom_id)
    payload["type"] = 5  # MODAL_SUBMIT
    payload["data"] = {
        "custom_id": custom_id,
        "components": [
            {
                "type": 18,
                "id": 1,
                "component": {"type": 3, "id": 2, "custom_id": "reason", "values": [reason]},
            },
            {
                "type": 18,
                "id": 3,
                "component": {"type": 4, "id": 4, "custom_id": "note", "value": note},
            },
        ],
    }
    payload.pop("message", None)
    return payload


def thread_message(
    thread_id: str, text: str, *, author_id: str = "42", bot: bool = False
) -> dict[str, Any]:
    return message(
        str(next(_ids)), thread_id, user(author_id, "alice", bot=bot), text, guild_id=GUILD_ID
    )


@dataclass
class DiscordHarness:
    emulator: DiscordEmulator
    bot: DocsBot
    state: PlatformState
    store: SqliteConversationStore

    def interaction(self, payload: dict[str, Any]) -> None:
        self.bot._connection.parse_interaction_create(payload)

    def gateway_message(self, payload: dict[str, Any]) -> None:
        self.bot._connection.parse_message_create(payload)

    async def until(self, check: Callable[[], bool], timeout: float = 15.0) -> None:
        await poll_until(check, timeout, self.emulator.calls)

    async def thread_ready(self, timeout: float = 15.0) -> str:
        """The first thread's id, once the bot has recorded it as its own: the thread exists
        on Discord a moment before that, and a follow-up sent in between is (rightly) ignored."""
        await self.until(lambda: bool(self.emulator.threads), timeout)
        thread_id = self.emulator.threads[0]
        await self.thread_remembered(thread_id, timeout)
        return thread_id

    async def thread_remembered(self, thread_id: str, timeout: float = 15.0) -> None:
        """Once the bot has recorded the thread as a conversation of its own (one it opened,
        or one where it was asked), whose follow-ups it answers."""
        deadline = asyncio.get_running_loop().time() + timeout
        while not await self.state.is_bot_thread(f"discord/thread/{thread_id}"):
            assert asyncio.get_running_loop().time() < deadline, "the thread was not recorded"
            await asyncio.sleep(0.02)


def make_discord_factory(
    kb: Settings, minilm: MiniLMEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    async def start(
        claude: ClaudeModel | None = None, policies: dict[str, ChannelPolicy] | None = None
    ) -> tuple[DiscordHarness, Callable]:
        emulator = DiscordEmulator()
        server = TestServer(emulator.app, host="127.0.0.1")
        await server.start_server()
        base = str(server.make_url("/api/v10"))
        monkeypatch.setattr(discord.http.Route, "BASE", base)
        monkeypatch.setattr(discord.webhook.async_.Route, "BASE", base)
        settings = kb.model_copy(
            update={
                "storage": kb.storage.model_copy(update={"data_dir": tmp_path}),
                "search": kb.search.model_copy(update={"sqlite_path": kb.index_path}),
                "channels": ChannelSettings(policies=policies or {}),
            }
        )
        index, store, askers, engine = kb_engine(kb, minilm, settings, claude)
        state = SqlitePlatformState(
            settings.state_path, settings.search.busy_timeout_ms, settings.discord.dedup_ttl_s
        )
        bot = build_discord_bot(settings, engine, store, state, embedder=minilm)
        await bot.login("bot-token")

        async def stop() -> None:
            await bot.close()
            await server.close()
            await engine.close()
            await store.close()
            await askers.close()
            await index.close()
            await state.close()

        return DiscordHarness(emulator, bot, state, store), stop

    return start


@pytest.fixture
async def discord_bot(kb, minilm, tmp_path, monkeypatch) -> AsyncIterator[DiscordHarness]:
    harness, stop = await make_discord_factory(kb, minilm, tmp_path, monkeypatch)()
    yield harness
    await stop()


@pytest.fixture
def discord_factory(kb, minilm, tmp_path, monkeypatch):
    return make_discord_factory(kb, minilm, tmp_path, monkeypatch)
