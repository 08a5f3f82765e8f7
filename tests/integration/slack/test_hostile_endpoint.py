"""Hostile and malformed requests to POST /slack/events, served as in production (the real Bolt
app behind our front check, on loopback): each gets the 4xx that fits, never a 5xx, and exactly
one short log line that holds no part of the body."""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import time
import urllib.parse
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from adapters.slack.server import EVENTS_PATH
from tests.integration.slack.conftest import SlackHarness
from tests.integration.stalled_body import held_after_refusal

MARKER = "SECRET-BODY-MARKER"


class Logs:
    """Every log line written during a test: our structlog events and any library's records."""

    def __init__(self, events: list[dict[str, Any]], caplog: pytest.LogCaptureFixture) -> None:
        self.events = events
        self._caplog = caplog

    def lines(self) -> list[str]:
        ours = [json.dumps(e, default=str) for e in self.events]
        libraries = [self._caplog.handler.format(r) for r in self._caplog.records]
        return ours + libraries

    def clear(self) -> None:
        self.events.clear()
        self._caplog.clear()


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> Iterator[Logs]:
    caplog.set_level(logging.INFO)
    with capture_logs() as events:
        yield Logs(events, caplog)
    structlog.reset_defaults()


def _form(payload: str) -> str:
    return "payload=" + urllib.parse.quote(payload)


FORM = "application/x-www-form-urlencoded"

# (body, content type, status): signed with the right secret unless the body is bytes.
SIGNED_CASES = [
    pytest.param("{bad json", "application/json", 400, id="malformed-json"),
    pytest.param(_form("not json"), FORM, 400, id="form-payload-not-json"),
    pytest.param(_form("[1, 2]"), FORM, 400, id="form-payload-a-list"),
    pytest.param(_form('{"type": "block_actions", "actions": "x"}'), FORM, 400, id="actions"),
    pytest.param("[1, 2]", "application/json", 400, id="json-list"),
    pytest.param('"text"', "application/json", 400, id="json-string"),
    pytest.param("{}", "application/json", 400, id="no-type"),
    pytest.param('{"type": 5}', "application/json", 400, id="type-not-a-string"),
    pytest.param('{"type": "url_verification"}', "application/json", 400, id="no-challenge"),
    pytest.param('{"type": "event_callback", "event": "x"}', "application/json", 400, id="event"),
    pytest.param(
        '{"type": "event_callback", "authorizations": "x"}', "application/json", 400, id="auths"
    ),
    pytest.param(
        '{"type": "event_callback", "authorizations": [1]}', "application/json", 400, id="auth"
    ),
    pytest.param('{"type": "x", "team": 5}', "application/json", 400, id="team-a-number"),
    pytest.param(
        '{"type": "event_callback", "event": null}', "application/json", 400, id="event-null"
    ),
    pytest.param(
        _form('{"type": "block_actions", "actions": [], "team": {"id": "T1"}}'),
        FORM,
        400,
        id="actions-empty",
    ),
    pytest.param(_form('{"type": "block_actions", "actions": null}'), FORM, 400, id="actions-null"),
    pytest.param(
        _form('{"type": "view_submission", "view": {"callback_id": {}}}'),
        FORM,
        400,
        id="view-callback-id-an-object",
    ),
    pytest.param(_form('{"type": "view_submission", "view": null}'), FORM, 400, id="view-null"),
    pytest.param(  # Bolt reads an event's user as text or an object: another type fails it
        '{"type": "event_callback", "event": {"type": "message", "user": 7}}',
        "application/json",
        400,
        id="event-user-a-number",
    ),
    pytest.param(
        json.dumps(
            {
                "type": "event_callback",
                "event": {
                    "type": "function_executed",
                    "function": {"callback_id": 5},
                    "function_execution_id": 5,
                    "bot_access_token": 5,
                    "inputs": 5,
                },
            }
        ),
        "application/json",
        400,
        id="function-executed-fields-not-strings",
    ),
    pytest.param("", "application/json", 400, id="empty-body"),
    pytest.param('{"a":' * 100_000, "application/json", 400, id="nested-past-the-stack"),
    pytest.param('{"n": ' + "9" * 5_000 + "}", "application/json", 400, id="huge-integer"),
    pytest.param(b"\xff\xfe{}", "application/json", 400, id="not-utf8"),
    pytest.param('{"type": "event_callback"}', "text/plain", 415, id="text-plain"),
    pytest.param('{"type": "event_callback"}', "application/xml", 415, id="xml"),
]


@pytest.mark.parametrize(("body", "content_type", "status"), SIGNED_CASES)
async def test_a_malformed_signed_request_is_a_4xx_and_one_log_line(
    slack: SlackHarness, logs: Logs, body: str | bytes, content_type: str, status: int
) -> None:
    assert await slack.post(body, content_type=content_type) == status
    _one_refusal(logs, status)
    assert slack.emulator.calls == []  # Bolt never ran: not even its auth.test


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        pytest.param({}, 401, id="unsigned"),
        pytest.param({"X-Slack-Request-Timestamp": "abc", "X-Slack-Signature": "v0=1"}, 401),
        pytest.param({"X-Slack-Request-Timestamp": "+17e8", "X-Slack-Signature": "v0=1"}, 401),
        pytest.param({"X-Slack-Request-Timestamp": "1_700_000", "X-Slack-Signature": "v0=1"}, 401),
        pytest.param({"X-Slack-Request-Timestamp": "9" * 40, "X-Slack-Signature": "v0=1"}, 401),
        pytest.param({"X-Slack-Signature": "v0=1"}, 401, id="no-timestamp"),
    ],
)
async def test_an_unsigned_request_is_401_whatever_its_body(
    slack: SlackHarness, logs: Logs, headers: dict[str, str], status: int
) -> None:
    headers = {"Content-Type": "application/json", **headers}
    for body in ("{bad json", '{"type": "url_verification", "challenge": "x"}', ""):
        async with slack.http.post(slack.url + EVENTS_PATH, data=body, headers=headers) as r:
            assert r.status == status
    assert len(logs.lines()) == 3, logs.lines()


async def test_wrong_secret_and_stale_timestamp_are_401(slack: SlackHarness, logs: Logs) -> None:
    body = '{"type": "url_verification", "challenge": "x"}'
    assert await slack.post(body, secret="not-the-secret") == 401
    _one_refusal(logs, 401)
    logs.clear()
    assert await slack.post(body, timestamp=int(time.time()) - 600) == 401
    _one_refusal(logs, 401)
    assert await slack.post(body) == 200  # the same request, signed now: served


async def test_an_unsigned_megabyte_adds_one_short_line_and_none_of_the_body(
    slack: SlackHarness, logs: Logs
) -> None:
    limit = slack.settings.slack.max_body_bytes
    body = json.dumps({"type": "event_callback", "text": MARKER * (limit // len(MARKER) - 10)})
    assert len(body) <= limit
    headers = {"Content-Type": "application/json", "X-Slack-Request-Timestamp": "abc"}
    for extra in ({}, {"X-Slack-Signature": "v0=forged"}):
        async with slack.http.post(
            slack.url + EVENTS_PATH, data=body, headers={**headers, **extra}
        ) as r:
            assert r.status == 401
    lines = logs.lines()
    assert len(lines) == 2, lines
    assert sum(len(line) for line in lines) < 1_000
    assert not any(MARKER[:6] in line for line in lines)


async def test_a_body_over_the_limit_is_413_before_it_is_read(
    slack: SlackHarness, logs: Logs
) -> None:
    limit = slack.settings.slack.max_body_bytes
    assert await slack.post("x" * (limit + 1)) == 413
    _one_refusal(logs, 413)
    logs.clear()

    sent = 0

    async def endless() -> AsyncIterator[bytes]:  # chunked, no Content-Length
        nonlocal sent
        while sent < 50 * limit:
            sent += 65_536
            yield b"x" * 65_536

    headers = {**_signed_shape(), "Content-Type": "application/json"}
    try:
        async with slack.http.post(slack.url + EVENTS_PATH, data=endless(), headers=headers) as r:
            assert r.status == 413
    except OSError:
        pass  # the server closed the connection while the client still sent: also refused
    _one_refusal(logs, 413)
    assert sent < 10 * limit


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
async def test_a_refused_body_holds_its_connection_only_briefly(
    slack_factory: Any, declared: bool
) -> None:
    """After the 413, the sender's unread body is drained for `refused_linger_s` so it can read
    the status, then the connection closes: a sender that neither finishes nor hangs up held
    it, and the server's shutdown, for aiohttp's 10 s."""
    harness, stop = await slack_factory(BOT_SLACK__REFUSED_LINGER_S="0.5")
    try:
        held = await held_after_refusal(
            harness.url,
            EVENTS_PATH,
            {**_signed_shape(), "Content-Type": "application/json"},
            body_bytes=harness.settings.slack.max_body_bytes + 1,
            declared=declared,
            status=413,
        )
        assert held < 3
    finally:
        stopping = time.monotonic()
        await stop()
    assert time.monotonic() - stopping < 3


async def test_a_compressed_bomb_is_413(slack: SlackHarness, logs: Logs) -> None:
    limit = slack.settings.slack.max_body_bytes
    bomb = gzip.compress(b"{" + b" " * (20 * limit) + b"}")
    assert len(bomb) < limit // 10
    headers = {**_signed_shape(), "Content-Type": "application/json", "Content-Encoding": "gzip"}
    async with slack.http.post(slack.url + EVENTS_PATH, data=bomb, headers=headers) as r:
        assert r.status == 413
    _one_refusal(logs, 413)


async def test_a_body_that_is_not_the_gzip_it_says_is_400_and_one_line(
    slack: SlackHarness, logs: Logs
) -> None:
    headers = {**_signed_shape(), "Content-Type": "application/json", "Content-Encoding": "gzip"}
    async with slack.http.post(slack.url + EVENTS_PATH, data=b"not gzip", headers=headers) as r:
        assert r.status == 400
    await asyncio.sleep(0.2)  # a line aiohttp would log after the response comes after it
    _one_refusal(logs, 400)


@pytest.mark.parametrize("trickle", [False, True], ids=["silent", "headers-a-byte-at-a-time"])
async def test_a_connection_without_a_whole_request_is_closed_in_bounded_time(
    slack_factory: Any, trickle: bool
) -> None:
    """Slowloris: connections that send nothing, or their headers a byte at a time, would each
    hold a file descriptor for aiohttp's default hour."""
    harness, stop = await slack_factory(BOT_SLACK__IDLE_CONNECTION_S="1")
    try:
        host, port = harness.url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        started = time.monotonic()
        request = f"POST {EVENTS_PATH} HTTP/1.1\r\nHost: x\r\nX-Pad: {'a' * 40}".encode()
        closed = False
        for byte in request if trickle else b"":
            try:
                writer.write(bytes([byte]))
                await writer.drain()
            except OSError:
                closed = True
                break
            await asyncio.sleep(0.1)
            if reader.at_eof() or writer.is_closing():
                break
        if not closed:
            assert await asyncio.wait_for(reader.read(), timeout=5) == b""  # closed by the server
        assert time.monotonic() - started < 4
        writer.close()
    finally:
        await stop()


async def test_a_slow_drip_body_is_408_in_bounded_time(slack_factory: Any, logs: Logs) -> None:
    harness, stop = await slack_factory(BOT_SLACK__BODY_READ_DEADLINE_S="1")
    try:

        async def drip() -> AsyncIterator[bytes]:
            for _ in range(30):
                yield b" "
                await asyncio.sleep(0.5)

        started = time.monotonic()
        headers = {**_signed_shape(), "Content-Type": "application/json"}
        try:
            async with harness.http.post(
                harness.url + EVENTS_PATH, data=drip(), headers=headers
            ) as r:
                assert r.status == 408
        except OSError:
            pass
        assert time.monotonic() - started < 5
        _one_refusal(logs, 408)
    finally:
        await stop()


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
async def test_other_methods_on_the_events_path_are_405(
    slack: SlackHarness, logs: Logs, method: str
) -> None:
    async with slack.http.request(method, slack.url + EVENTS_PATH) as r:
        assert r.status == 405
    _one_refusal(logs, 405)


async def test_huge_headers_are_a_4xx_and_one_short_line(slack: SlackHarness, logs: Logs) -> None:
    headers = {"Content-Type": "application/json", "X-Junk": MARKER * 2_000}
    async with slack.http.post(slack.url + EVENTS_PATH, data="{}", headers=headers) as r:
        assert 400 <= r.status < 500
    lines = logs.lines()
    assert len(lines) == 1, lines
    assert len(lines[0]) < 300
    assert MARKER not in lines[0]
    assert "Traceback" not in lines[0]


async def test_a_signed_event_type_nobody_handles_is_one_short_line(
    slack: SlackHarness, logs: Logs
) -> None:
    """Bolt answers 404 and logs the request with a page of suggested code: cut to one line."""
    body = json.dumps({"type": "block_suggestion", "value": MARKER, "action_id": "a"})
    assert await slack.post(_form(body), content_type=FORM) == 404
    lines = [line for line in logs.lines() if "auth.test" not in line]
    assert len(lines) == 1, lines
    assert MARKER not in lines[0]


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param({"type": "view_submission", "view": {"callback_id": "{x}"}}, id="braces"),
        pytest.param(
            {"type": "view_submission", "view": {"callback_id": "v"}, "response_urls": [{}]},
            id="response-url-missing",
        ),
    ],
)
async def test_a_body_bolt_fails_on_is_400_not_500(
    slack: SlackHarness, logs: Logs, payload: dict[str, Any]
) -> None:
    """Past the front check, Bolt may still fail on a body (its own KeyError: a 500): the
    sender's fault, so a 400, with our one refusal line and none of the body."""
    body = json.dumps({**payload, "marker": MARKER})
    assert await slack.post(_form(body), content_type=FORM) == 400
    lines = [line for line in logs.lines() if "auth.test" not in line]
    refusals = [line for line in lines if "slack_request_refused" in line]
    assert len(refusals) == 1, lines
    assert '"status": 400' in refusals[0]
    assert len(lines) <= 2, lines  # ours, and at most Bolt's own error as one short line
    assert all(len(line) < 300 and MARKER not in line for line in lines), lines
    assert not any("Traceback" in line for line in lines)


async def test_a_well_formed_url_verification_still_answers(slack: SlackHarness) -> None:
    body = json.dumps({"type": "url_verification", "challenge": "c-123"})
    assert await slack.post(body) == 200


def _signed_shape() -> dict[str, str]:
    """Signature headers of the right shape and age (the signature itself is only checked once
    the body is read): the request gets past the 401 to the body's own limits."""
    return {
        "X-Slack-Request-Timestamp": str(int(time.time())),
        "X-Slack-Signature": "v0=" + "0" * 64,
    }


async def test_an_unsigned_body_is_refused_before_it_is_read(
    slack: SlackHarness, logs: Logs
) -> None:
    """An unsigned request is 401 at once, not after its body arrived: a drip never finishes."""

    async def drip() -> AsyncIterator[bytes]:
        for _ in range(30):
            yield b" "
            await asyncio.sleep(0.5)

    started = time.monotonic()
    try:
        async with slack.http.post(
            slack.url + EVENTS_PATH, data=drip(), headers={"Content-Type": "application/json"}
        ) as r:
            assert r.status == 401
    except OSError:
        pass
    assert time.monotonic() - started < 5  # the drip takes 15 s; the body deadline is 10 s
    _one_refusal(logs, 401)


def _one_refusal(logs: Logs, status: int) -> None:
    lines = logs.lines()
    assert len(lines) == 1, lines
    assert "slack_request_refused" in lines[0]
    assert f'"status": {status}' in lines[0]
    assert len(lines[0]) < 300
    assert MARKER not in lines[0]


def _event(kind: str, **fields: Any) -> dict[str, Any]:
    event = {"type": kind, "user": "U2", "text": f"how? {MARKER}", "ts": "1700000000.000900"}
    return {**event, "channel": "C1", **fields}


@pytest.mark.parametrize(
    ("event", "wrong"),
    [
        pytest.param(_event("app_mention", text=123), "text", id="mention-text-number"),
        pytest.param(_event("app_mention", text=["a"]), "text", id="mention-text-list"),
        pytest.param(_event("app_mention", text={"a": 1}), "text", id="mention-text-object"),
        pytest.param(_event("message", channel_type="im", text=None), "text", id="dm-text-null"),
        pytest.param(
            _event("message", thread_ts=17.5, channel_type="im"), "thread_ts", id="dm-ts-number"
        ),
        pytest.param(
            {"type": "app_context_changed", "user": "U2", "context": "zz"},
            "context",
            id="context-not-an-object",
        ),
    ],
)
async def test_an_event_with_a_field_of_the_wrong_type_is_ignored_with_one_warning(
    slack: SlackHarness, logs: Logs, event: dict[str, Any], wrong: str
) -> None:
    """Null, a number or a list where Slack sends text: the event gets its 200 and goes to no
    listener (no placeholder, no apology), with one warning naming the field."""
    assert await slack.event(event, "EvWrongType") == 200
    await _ignored_with_one_warning(slack, logs, wrong)


@pytest.mark.parametrize(
    ("event", "missing"),
    [
        pytest.param(_event("app_mention", channel=None), "channel", id="mention-no-channel"),
        pytest.param(_event("app_mention", ts=None), "ts", id="mention-no-ts"),
        pytest.param(
            _event("app_mention", channel={"id": "C1"}), "channel", id="mention-channel-object"
        ),
        pytest.param(
            _event("message", channel=None, thread_ts="1700000000.000100"),
            "channel",
            id="thread-reply-no-channel",
        ),
        pytest.param(
            _event("message", channel=None, channel_type="im"), "channel", id="dm-no-channel"
        ),
        pytest.param(
            {
                "type": "reaction_added",
                "user": "U3",
                "reaction": "question",
                "item": {"type": "message", "ts": "1700000000.000900"},
            },
            "channel",
            id="reaction-item-no-channel",
        ),
    ],
)
async def test_an_event_without_a_field_we_need_is_ignored_with_one_warning(
    slack: SlackHarness, logs: Logs, event: dict[str, Any], missing: str
) -> None:
    """Slack always sends these fields; a signed event without one gets its 200 and is ignored
    with a warning naming the field, not a listener's KeyError, and never its text."""
    event = {key: value for key, value in event.items() if value is not None}
    assert await slack.event(event, "EvIncomplete") == 200
    await _ignored_with_one_warning(slack, logs, missing)


async def _ignored_with_one_warning(slack: SlackHarness, logs: Logs, field: str) -> None:
    """One warning naming `field`, never the event's text; nothing posted, nothing read."""
    await slack.settle()
    lines = [line for line in logs.lines() if "auth.test" not in line]
    assert len(lines) == 1, lines
    assert "slack_event_incomplete" in lines[0]
    assert f'"missing": ["{field}"]' in lines[0]
    assert MARKER not in lines[0]
    asked = [name for name, _ in slack.emulator.calls if name != "auth.test"]
    assert asked == []
