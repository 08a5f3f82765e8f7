"""`bot slack --http` as a real process: it says where it listens, checks its token before
serving, and on SIGTERM lets the answers in progress finish (or apologises for them in their
threads) and exits 0. Slack and the model are local stand-ins; the answer is slow on purpose."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from slack_sdk.signature import SignatureVerifier

from adapters.slack.app import SHUTDOWN_APOLOGY
from adapters.slack.leftovers import LEFTOVER_APOLOGY
from adapters.slack.server import EVENTS_PATH
from core.config import Settings
from tests.conftest import REPO
from tests.fakes.elasticsearch_emulator import free_port
from tests.fakes.slack_api import BOT_USER, TEAM, SlackEmulator
from tests.fakes.slow_chat import SlowChatServer

SECRET = "process-signing-secret"
START_TIMEOUT_S = 90  # the process loads the embedding model (warm_up) before it listens
# Bounds on a busy 2-core machine: far above what a drain takes, far below the 60 s answer.
DRAIN_BOUND_S = 40
QUIET_EXIT_BOUND_S = 20
BOT = Path(sys.executable).with_name("bot")


class BotProcess:
    def __init__(self, process: asyncio.subprocess.Process, url: str) -> None:
        self.process = process
        self.url = url

    async def mention(self, http: ClientSession, text: str, event_id: str) -> int:
        payload = {
            "type": "event_callback",
            "team_id": TEAM,
            "api_app_id": "A1",
            "event_id": event_id,
            "event_time": int(time.time()),
            "event": {
                "type": "app_mention",
                "user": "U1",
                "text": f"<@{BOT_USER}> {text}",
                "ts": f"1700000000.{event_id[-6:]:0>6}",
                "channel": "C1",
                "channel_type": "channel",
            },
            "authorizations": [{"team_id": TEAM, "user_id": BOT_USER, "is_bot": True}],
        }
        body = json.dumps(payload)
        ts = str(int(time.time()))
        headers = {
            "Content-Type": "application/json",
            "X-Slack-Request-Timestamp": ts,
            "X-Slack-Signature": str(
                SignatureVerifier(SECRET).generate_signature(timestamp=ts, body=body)
            ),
        }
        async with http.post(self.url + EVENTS_PATH, data=body, headers=headers) as r:
            return r.status


async def _start(env: dict[str, str], *mode: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        str(BOT),
        "slack",
        *(mode or ("--http", "--port", "0")),
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


@pytest.fixture
async def emulator() -> AsyncIterator[tuple[SlackEmulator, str]]:
    slack = SlackEmulator()
    server = TestServer(slack.app, host="127.0.0.1")
    await server.start_server()
    yield slack, str(server.make_url("/api/"))
    await server.close()


def _env(kb: Settings, tmp_path: Path, slack_url: str, **extra: str) -> dict[str, str]:
    return {
        "BOT_CONFIG": str(REPO / "config.yaml"),
        "BOT_STORAGE__DATA_DIR": str(tmp_path / "data"),
        "BOT_SEARCH__SQLITE_PATH": str(kb.index_path),
        "BOT_SLACK__BASE_URL": slack_url,
        "BOT_SLACK__HOST": "127.0.0.1",
        "BOT_SLACK__STREAM_API": "false",
        "SLACK_BOT_TOKEN": "xoxb-test",
        "SLACK_SIGNING_SECRET": SECRET,
        "ANTHROPIC_API_KEY": "",
        **extra,
    }


async def _serving_bot(
    kb: Settings,
    tmp_path: Path,
    slack_url: str,
    model: SlowChatServer,
    grace_s: float,
    **extra: str,
) -> AsyncIterator[BotProcess]:
    server = TestServer(model.app, host="127.0.0.1")
    await server.start_server()
    env = _env(
        kb,
        tmp_path,
        slack_url,
        BOT_ANSWERS__PROVIDER="openai",
        BOT_OPENAI__BASE_URL=str(server.make_url("/v1")),
        BOT_OPENAI__MODEL="slow-test",
        BOT_OPENAI__TIMEOUT_S="120",
        # The stand-in's answer is no passage's sentence, and these tests are about the
        # process: its words are shown as written, so the test sees that the answer finished.
        BOT_OPENAI__GROUND_ANSWERS="false",
        BOT_SLACK__SHUTDOWN_GRACE_S=str(grace_s),
        **extra,
    )
    process = await _start(env)
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), START_TIMEOUT_S)
        assert line.decode().startswith("listening on 127.0.0.1:"), line
        port = int(line.decode().rsplit(":", 1)[1])
        yield BotProcess(process, f"http://127.0.0.1:{port}")
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await server.close()


async def _until(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


async def _until_draining(http: ClientSession, url: str) -> None:
    """The signal has been handled once health checks say 503 (polled, not slept for)."""
    deadline = time.monotonic() + DRAIN_BOUND_S
    while True:
        async with http.get(url + "/healthz") as response:
            if response.status == 503:
                return
        assert time.monotonic() < deadline, "the process never started draining"
        await asyncio.sleep(0.05)


async def test_sigterm_lets_the_answer_in_flight_finish_then_exits_0(
    kb: Settings, tmp_path: Path, emulator: tuple[SlackEmulator, str]
) -> None:
    slack, slack_url = emulator
    model = SlowChatServer(delay_s=1.5)
    async for bot in _serving_bot(kb, tmp_path, slack_url, model, grace_s=30):
        async with ClientSession() as http:
            assert await bot.mention(http, "what is slow?", "Ev000001") == 200
            await _until(lambda: model.calls >= 1, 30, "the model was never asked")
            bot.process.send_signal(signal.SIGTERM)
            await _until_draining(http, bot.url)
            # Draining: a new event is refused, so Slack retries it on another process.
            assert await bot.mention(http, "and now?", "Ev000002") == 503
            async with http.get(bot.url + "/readyz") as ready:
                assert ready.status == 503
                assert (await ready.json())["reason"] == "shutting down"
            assert await asyncio.wait_for(bot.process.wait(), 30) == 0
        assert model.calls == 2  # the search round and the respond round: the answer finished
        posted = slack.called("chat.postMessage")
        assert len(posted) == 1  # the placeholder, for the first event only
        final = slack.called("chat.update")[-1]
        assert final["ts"] == slack.posted_ts[0]
        assert "The slow answer." in json.dumps(final)
        assert SHUTDOWN_APOLOGY not in json.dumps(slack.calls)


async def test_an_answer_still_running_at_the_deadline_is_apologised_for(
    kb: Settings, tmp_path: Path, emulator: tuple[SlackEmulator, str]
) -> None:
    slack, slack_url = emulator
    model = SlowChatServer(delay_s=60)
    async for bot in _serving_bot(kb, tmp_path, slack_url, model, grace_s=1):
        async with ClientSession() as http:
            assert await bot.mention(http, "what is slow?", "Ev000003") == 200
        await _until(lambda: model.calls >= 1, 30, "the model was never asked")
        started = time.monotonic()
        bot.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(bot.process.wait(), 30) == 0
        assert time.monotonic() - started < DRAIN_BOUND_S  # the grace and the apology, not 60 s
        posted = slack.called("chat.postMessage")
        assert len(posted) == 1
        final = slack.called("chat.update")[-1]
        assert final["ts"] == slack.posted_ts[0]  # the placeholder itself replaced
        assert final["text"] == SHUTDOWN_APOLOGY


# A dead process is told within a second, and looked for again every few tenths.
_QUICK_LEFTOVERS = {
    "BOT_SLACK__LEFTOVERS__HEARTBEAT_S": "0.2",
    "BOT_SLACK__LEFTOVERS__OWNER_SILENT_S": "1",
    "BOT_SLACK__LEFTOVERS__SWEEP_INTERVAL_S": "0.3",
}
LEFTOVER_BOUND_S = 30


@pytest.mark.parametrize("backend", ["sqlite", "elasticsearch"])
async def test_a_placeholder_left_by_a_killed_process_is_apologised_for_once_by_the_next(
    kb: Settings,
    tmp_path: Path,
    emulator: tuple[SlackEmulator, str],
    backend: str,
    request: pytest.FixtureRequest,
) -> None:
    """SIGKILL mid-answer: no drain, no apology from the process itself. The next `bot slack`
    on the same data edits the placeholder into the apology, once, and looks again and
    again without touching it twice."""
    slack, slack_url = emulator
    extra = {**_QUICK_LEFTOVERS, **_backend_env(backend, request)}
    model = SlowChatServer(delay_s=600)  # an answer that never finishes
    async for bot in _serving_bot(kb, tmp_path, slack_url, model, grace_s=30, **extra):
        async with ClientSession() as http:
            assert await bot.mention(http, "what is slow?", "Ev000011") == 200
        await _until(lambda: model.calls >= 1, 30, "the model was never asked")
        bot.process.kill()
        await bot.process.wait()
    [placeholder] = slack.posted_ts
    assert not slack.called("chat.update")  # left as it was: "Looking through the docs…"
    async for again in _serving_bot(kb, tmp_path, slack_url, SlowChatServer(0), 30, **extra):
        await _until(lambda: bool(_leftover_apologies(slack)), LEFTOVER_BOUND_S, "no apology")
        await asyncio.sleep(2)  # several more looks, by a process whose store saw the claim
        again.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(again.process.wait(), 30) == 0
    [apology] = _leftover_apologies(slack)
    assert apology["ts"] == placeholder
    assert apology["channel"] == "C1"
    assert len(slack.called("chat.update")) == 1  # nothing else was edited
    assert len(slack.called("chat.postMessage")) == 1  # the placeholder: no message of its own


def _leftover_apologies(slack: SlackEmulator) -> list[dict[str, Any]]:
    return [u for u in slack.called("chat.update") if u.get("text") == LEFTOVER_APOLOGY]


def _backend_env(backend: str, request: pytest.FixtureRequest) -> dict[str, str]:
    """The processes' store: the SQLite state file in the data dir, or one Elasticsearch
    (the emulator) under a prefix of this test's own."""
    if backend == "sqlite":
        return {}
    es = request.getfixturevalue("es_emulator")
    return {
        "BOT_SEARCH__BACKEND": "elasticsearch",
        "BOT_ELASTICSEARCH__URL": es.url,
        "BOT_ELASTICSEARCH__INDEX_PREFIX": f"test-{uuid.uuid4().hex[:12]}",
        "BOT_ELASTICSEARCH__NUMBER_OF_REPLICAS": "0",
    }


async def test_sigint_without_answers_in_flight_exits_0_at_once(
    kb: Settings, tmp_path: Path, emulator: tuple[SlackEmulator, str]
) -> None:
    _, slack_url = emulator
    async for bot in _serving_bot(kb, tmp_path, slack_url, SlowChatServer(0), grace_s=30):
        started = time.monotonic()
        bot.process.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(bot.process.wait(), 30) == 0
        assert time.monotonic() - started < QUIET_EXIT_BOUND_S


async def _http_bot(env: dict[str, str]) -> AsyncIterator[BotProcess]:
    process = await _start(env)
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), START_TIMEOUT_S)
        assert line.decode().startswith("listening on 127.0.0.1:"), line
        yield BotProcess(process, f"http://127.0.0.1:{int(line.decode().rsplit(':', 1)[1])}")
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


@pytest.mark.parametrize("index", ["empty", "ingested"])
async def test_readyz_says_whether_questions_can_be_answered_healthz_only_that_it_is_up(
    kb: Settings, tmp_path: Path, emulator: tuple[SlackEmulator, str], index: str
) -> None:
    """An index with nothing in it (the docs ingested on another machine, or never) answers
    every question "the knowledge base is empty": /healthz, a liveness probe, still says ok;
    /readyz says why the bot can't answer, so a platform or an operator sees it."""
    _, slack_url = emulator
    elsewhere = {"BOT_SEARCH__SQLITE_PATH": str(tmp_path / "fresh" / "index.sqlite")}
    env = _env(kb, tmp_path, slack_url, **(elsewhere if index == "empty" else {}))
    async for bot in _http_bot(env):
        async with ClientSession() as http:
            async with http.get(bot.url + "/healthz") as health:
                assert (health.status, await health.json()) == (200, {"ok": True})
            async with http.get(bot.url + "/readyz") as ready:
                said = await ready.json()
        if index == "empty":
            assert ready.status == 503
            assert said == {
                "ok": False,
                "reason": "the knowledge base is empty: nothing has been ingested",
            }
        else:
            assert (ready.status, said) == (200, {"ok": True})


async def test_a_token_revoked_after_start_makes_readyz_say_so(
    kb: Settings, tmp_path: Path, emulator: tuple[SlackEmulator, str]
) -> None:
    """The start checks the token once; revoked later (the app uninstalled), every answer
    failed to post while /readyz still said ok."""
    slack, slack_url = emulator
    async for bot in _http_bot(_env(kb, tmp_path, slack_url)):
        async with ClientSession() as http:
            async with http.get(bot.url + "/readyz") as ready:
                assert ready.status == 200
            for method in ("chat.postMessage", "chat.update", "reactions.add"):
                slack.refuse(method, "token_revoked")
            assert await bot.mention(http, "how do I ingest a folder?", "Ev000042") == 200
            await _until(lambda: slack.called("chat.postMessage"), 30, "no answer was posted")
            async with http.get(bot.url + "/readyz") as ready:
                assert ready.status == 503
                assert await ready.json() == {
                    "ok": False,
                    "reason": "Slack refuses the bot token (token_revoked): set a valid "
                    "SLACK_BOT_TOKEN",
                }
            async with http.get(bot.url + "/healthz") as health:
                assert health.status == 200  # alive: a restart would not bring the token back


@pytest.mark.parametrize("error", ["invalid_auth", "not_authed", "account_inactive"])
async def test_a_refused_token_stops_the_process_with_one_line(
    kb: Settings, tmp_path: Path, emulator: tuple[SlackEmulator, str], error: str
) -> None:
    slack, slack_url = emulator
    slack.fail("auth.test", error)
    process = await _start(_env(kb, tmp_path, slack_url))
    stdout, stderr = await asyncio.wait_for(process.communicate(), START_TIMEOUT_S)
    assert process.returncode not in (0, None)
    assert b"listening" not in stdout
    lines = stderr.decode().strip().splitlines()
    assert len(lines) == 1, lines
    assert "Traceback" not in lines[0]
    assert f"SLACK_BOT_TOKEN was refused by Slack ({error})" in lines[0]
    assert "xoxb-test" not in stderr.decode()


async def test_slack_unreachable_at_start_is_one_line(kb: Settings, tmp_path: Path) -> None:
    with_nobody_listening = "http://127.0.0.1:9/api/"
    process = await _start(_env(kb, tmp_path, with_nobody_listening))
    _, stderr = await asyncio.wait_for(process.communicate(), START_TIMEOUT_S)
    assert process.returncode not in (0, None)
    lines = stderr.decode().strip().splitlines()
    assert len(lines) == 1, lines
    assert "Traceback" not in lines[0]
    assert "could not be reached" in lines[0]


@pytest.mark.parametrize("given_by", ["--port", "PORT"])
async def test_a_port_in_use_is_one_line_naming_where_it_was_set(
    kb: Settings, tmp_path: Path, emulator: tuple[SlackEmulator, str], given_by: str
) -> None:
    _, slack_url = emulator
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        if given_by == "PORT":
            process = await _start(_env(kb, tmp_path, slack_url, PORT=port), "--http")
        else:
            process = await _start(_env(kb, tmp_path, slack_url), "--http", "--port", port)
        stdout, stderr = await asyncio.wait_for(process.communicate(), START_TIMEOUT_S)
    assert process.returncode == 2
    assert b"listening" not in stdout
    lines = stderr.decode().strip().splitlines()
    assert lines == [
        f"error: port {port} is in use on 127.0.0.1: stop what listens there, or choose "
        f"another port ({given_by})"
    ]


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (("--port", "99999"), {}, "Invalid value for '--port'"),
        (("--port", "-1"), {}, "Invalid value for '--port'"),
        ((), {"PORT": "abc"}, "error: PORT='abc' is not a port number"),
        ((), {"PORT": "99999"}, "error: PORT='99999' is not a port number"),
        ((), {"PORT": "+80"}, "error: PORT='+80' is not a port number"),
    ],
)
async def test_a_port_that_is_not_one_is_refused_naming_the_option_or_variable(
    kb: Settings, tmp_path: Path, args: tuple[str, ...], env: dict[str, str], said: str
) -> None:
    process = await _start(_env(kb, tmp_path, "http://127.0.0.1:9/api/", **env), "--http", *args)
    _, stderr = await asyncio.wait_for(process.communicate(), START_TIMEOUT_S)
    assert process.returncode == 2
    assert said in stderr.decode()
    assert "Traceback" not in stderr.decode()
    assert "unexpected" not in stderr.decode()


# -- Socket Mode -------------------------------------------------------------------------------

APP_TOKEN = "xapp-1-test-app-token"


async def _start_socket(kb: Settings, tmp_path: Path, slack_url: str) -> asyncio.subprocess.Process:
    return await _start(_env(kb, tmp_path, slack_url, SLACK_APP_TOKEN=APP_TOKEN), "--socket")


@pytest.mark.parametrize("error", ["invalid_auth", "not_allowed_token_type", "token_revoked"])
async def test_a_refused_app_token_stops_socket_mode_with_one_line(
    kb: Settings, tmp_path: Path, emulator: tuple[SlackEmulator, str], error: str
) -> None:
    """The SDK would retry a refused app token for ever (every few seconds, a log line each);
    the process stops at the first refusal instead, and says which token and what to do."""
    slack, slack_url = emulator
    slack.refuse("apps.connections.open", error)
    process = await _start_socket(kb, tmp_path, slack_url)
    try:
        await _until(lambda: slack.called("apps.connections.open"), START_TIMEOUT_S, "no call")
        refused_at = time.monotonic()
        stdout, stderr = await asyncio.wait_for(process.communicate(), QUIET_EXIT_BOUND_S)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert time.monotonic() - refused_at < QUIET_EXIT_BOUND_S
    assert process.returncode not in (0, None)
    assert b"connected" not in stdout
    lines = stderr.decode().strip().splitlines()
    assert len(lines) == 1, lines
    assert "Traceback" not in lines[0]
    assert f"SLACK_APP_TOKEN was refused by Slack ({error})" in lines[0]
    assert APP_TOKEN not in stderr.decode()
    assert len(slack.called("apps.connections.open")) == 1  # refused once: not asked again


async def test_an_app_token_refused_when_asked_again_stops_socket_mode(
    kb: Settings, tmp_path: Path, emulator: tuple[SlackEmulator, str]
) -> None:
    """Slack unwell at the first try, the token refused at the SDK's next: the process stops
    there with the same line, not at the next restart."""
    slack, slack_url = emulator
    slack.fail("apps.connections.open", "internal_error")
    slack.refuse("apps.connections.open", "token_revoked")
    process = await _start_socket(kb, tmp_path, slack_url)
    try:
        _, stderr = await asyncio.wait_for(process.communicate(), START_TIMEOUT_S)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode not in (0, None)
    last = stderr.decode().strip().splitlines()[-1]
    assert last.startswith("error: SLACK_APP_TOKEN was refused by Slack (token_revoked)"), last
    assert "Traceback" not in stderr.decode()
    assert len(slack.called("apps.connections.open")) == 2


async def test_socket_mode_serves_metrics_on_the_metrics_port(
    kb: Settings, tmp_path: Path, emulator: tuple[SlackEmulator, str]
) -> None:
    """Socket Mode has no HTTP server of its own: `metrics.port` serves them, as it does for
    `bot discord` and `bot clock`, while the process keeps trying to connect."""
    slack, slack_url = emulator
    slack.refuse("apps.connections.open", "internal_error")  # a trouble that may pass
    port = free_port()
    env = _env(kb, tmp_path, slack_url, SLACK_APP_TOKEN=APP_TOKEN, BOT_METRICS__PORT=str(port))
    process = await _start(env, "--socket")
    try:
        assert process.stdout is not None
        url = f"http://127.0.0.1:{port}/metrics"
        async with asyncio.timeout(START_TIMEOUT_S):
            while f"Metrics at {url}".encode() not in (line := await process.stdout.readline()):
                assert line, "the process ended"
        async with ClientSession() as http, http.get(url) as response:
            assert response.status == 200
            assert "# HELP docbot_answers_total " in await response.text()
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), QUIET_EXIT_BOUND_S) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


@pytest.mark.parametrize(
    ("trouble", "stop"),
    [("no WebSocket", signal.SIGINT), ("Slack unwell", signal.SIGTERM)],
)
async def test_a_stop_signal_ends_socket_mode_still_trying_to_connect(
    kb: Settings,
    tmp_path: Path,
    emulator: tuple[SlackEmulator, str],
    trouble: str,
    stop: signal.Signals,
) -> None:
    """A failure that may pass (the WebSocket can't be reached, Slack answers internal_error)
    is tried again, but Ctrl-C or SIGTERM ends the trying at once, exit 0."""
    slack, slack_url = emulator
    if trouble == "Slack unwell":
        slack.refuse("apps.connections.open", "internal_error")
    process = await _start_socket(kb, tmp_path, slack_url)
    try:
        await _until(lambda: slack.called("apps.connections.open"), START_TIMEOUT_S, "no call")
        assert process.stderr is not None
        # Trying again: the SDK's line for each failed attempt (in the bot's log format).
        async with asyncio.timeout(START_TIMEOUT_S):
            while b"Failed to connect" not in (line := await process.stderr.readline()):
                assert line, "the process ended"
        assert process.returncode is None
        started = time.monotonic()
        process.send_signal(stop)
        assert await asyncio.wait_for(process.wait(), QUIET_EXIT_BOUND_S) == 0
        assert time.monotonic() - started < QUIET_EXIT_BOUND_S
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
