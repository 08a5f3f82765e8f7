"""The real Bolt AsyncApp, served over HTTP on loopback, talking to the Slack emulator."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer
from slack_sdk.signature import SignatureVerifier

from adapters.slack.server import (
    EVENTS_PATH,
    SlackHttpEndpoint,
    SlackService,
)
from bot.wiring import build_slack_app
from core.answer.claude import ClaudeModel
from core.backends.sqlite.conversation_store import SqliteConversationStore
from core.backends.sqlite.platform_state import SqlitePlatformState
from core.config import Settings
from core.config_loader import load_settings
from core.ports import PlatformState
from core.search.embedder import MiniLMEmbedder
from tests.conftest import REPO
from tests.fakes.slack_api import BOT_USER, TEAM, SlackEmulator
from tests.integration.answers.helpers import kb_engine, poll_until

SECRET = "test-signing-secret"


@dataclass
class SlackHarness:
    emulator: SlackEmulator
    url: str
    http: ClientSession
    settings: Settings
    store: SqliteConversationStore
    state: PlatformState
    service: SlackService
    endpoint: SlackHttpEndpoint
    # A response_url the emulator answers, for interactions that carry one.
    response_url: str

    async def post(
        self,
        body: str | bytes,
        content_type: str = "application/json",
        timestamp: int | str | None = None,
        secret: str = SECRET,
        headers: dict[str, str] | None = None,
    ) -> int:
        """POST to the events endpoint, signed as Slack signs (a bytes body is sent as is, with
        a signature that cannot match)."""
        ts = str(int(time.time()) if timestamp is None else timestamp)
        signature = (
            SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)
            if isinstance(body, str)
            else "v0=" + "0" * 64
        )
        all_headers = {
            "X-Slack-Request-Timestamp": ts,
            "X-Slack-Signature": str(signature),
            "Content-Type": content_type,
            **(headers or {}),
        }
        async with self.http.post(self.url + EVENTS_PATH, data=body, headers=all_headers) as r:
            return r.status

    async def event(self, event: dict[str, Any], event_id: str, **kwargs: Any) -> int:
        payload = {
            "token": "legacy",
            "team_id": TEAM,
            "api_app_id": "A1",
            "type": "event_callback",
            "event_id": event_id,
            "event_time": int(time.time()),
            "event": event,
            "authorizations": [{"team_id": TEAM, "user_id": BOT_USER, "is_bot": True}],
        }
        return await self.post(json.dumps(payload), **kwargs)

    async def click(
        self, action_id: str, value: str, user: str = "U2", thread_ts: str | None = None
    ) -> int:
        payload = {
            "type": "block_actions",
            "team": {"id": TEAM},
            "user": {"id": user},
            "api_app_id": "A1",
            "channel": {"id": "C1"},
            "trigger_id": "t1",
            "container": {"type": "message", "channel_id": "C1", "thread_ts": thread_ts},
            "actions": [
                {
                    "type": "button",
                    "action_id": action_id,
                    "value": value,
                    "block_id": f"feedback:{value}",
                    "action_ts": "1",
                }
            ],
        }
        body = "payload=" + urllib.parse.quote(json.dumps(payload))
        return await self.post(body, content_type="application/x-www-form-urlencoded")

    async def until(self, check: Callable[[], bool], timeout: float = 15.0) -> None:
        await poll_until(check, timeout, self.emulator.calls)

    async def settle(self, seconds: float = 0.5) -> None:
        """Give background listeners time to do something they should not do."""
        await asyncio.sleep(seconds)


def make_harness_factory(kb: Settings, minilm: MiniLMEmbedder, tmp_path: Path):
    async def start(
        claude: ClaudeModel | None = None,
        state: PlatformState | None = None,
        **env: str,
    ) -> tuple[SlackHarness, Callable]:
        """`state`: the platform state to use (one of a backend's; its owner closes it), else
        a SQLite one in `tmp_path`, closed with the harness."""
        emulator = SlackEmulator()
        api = TestServer(emulator.app, host="127.0.0.1")
        await api.start_server()
        settings = load_settings(
            REPO / "config.yaml",
            environ={
                "BOT_STORAGE__DATA_DIR": str(tmp_path),
                "BOT_SEARCH__SQLITE_PATH": str(kb.index_path),
                "BOT_SLACK__BASE_URL": str(api.make_url("/api/")),
                "SLACK_BOT_TOKEN": "xoxb-test",
                "SLACK_SIGNING_SECRET": SECRET,
                **env,
            },
        )
        index, store, askers, engine = kb_engine(kb, minilm, settings, claude)
        own_state = state is None
        if state is None:
            state = SqlitePlatformState(
                settings.state_path, settings.search.busy_timeout_ms, settings.slack.dedup_ttl_s
            )
        service = build_slack_app(
            settings, engine, store, state, embedder=minilm, socket_mode=False
        )
        endpoint = SlackHttpEndpoint(service)
        runner = endpoint.runner()  # served as in production
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        host, port = runner.addresses[0][:2]
        http = ClientSession()
        harness = SlackHarness(
            emulator,
            f"http://{host}:{port}",
            http,
            settings,
            store,
            state,
            service,
            endpoint,
            str(api.make_url("/actions/T1/1/hook")),
        )

        async def stop() -> None:
            await http.close()
            await runner.cleanup()
            await api.close()
            await engine.close()
            await store.close()
            await askers.close()
            await index.close()
            if own_state:
                await state.close()

        return harness, stop

    return start


@pytest.fixture
async def slack(
    kb: Settings, minilm: MiniLMEmbedder, tmp_path: Path
) -> AsyncIterator[SlackHarness]:
    harness, stop = await make_harness_factory(kb, minilm, tmp_path)()
    yield harness
    await stop()


@pytest.fixture
def slack_factory(kb: Settings, minilm: MiniLMEmbedder, tmp_path: Path):
    return make_harness_factory(kb, minilm, tmp_path)
