"""Serving the Slack app: HTTP mode (the Procfile's `web` process) or Socket Mode.

HTTP mode serves POST /slack/events (events and interactivity), GET /healthz (the process is
up: a liveness probe) and GET /readyz (it can answer: 503 with the reason when it can't, such
as an index that is empty or unreadable, or while it shuts down). The events
endpoint is open to the internet, so every request passes a cheap front check before Bolt sees
it: size (413, refused before the body is read past the limit), signature (401: unsigned, wrongly
signed, stale or non-numeric timestamp), content type (415), then the body must be UTF-8 and
parse the way Bolt will parse it, into an object of the shape Bolt reads (400). Each refusal is
one short log line (method, path, size, status, reason), never the body: Bolt would otherwise
answer a malformed body with a 500 and a traceback, and log a refused one whole.

Both modes check the bot token with `auth.test` before serving (a wrong token would otherwise
show only at the first @mention), beat in the state store and apologise for the placeholders of
killed processes while they run (`adapters/slack/leftovers`), and stop on SIGTERM or SIGINT
the same way: no new events, answers in progress get `shutdown_grace_s` to finish, the rest are
apologised for in their threads, then the process exits 0. Socket Mode stops too when Slack
refuses the app token, at the first connection or a later one (one line, a non-zero exit);
other connection failures are tried again until they pass or the process is stopped.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

import structlog
from aiohttp import ClientError, web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from adapters import one_line_logs
from adapters.one_line_logs import OneShortLine
from adapters.slack.app import SlackBot
from adapters.slack.leftovers import LeftoverSweeper
from adapters.slack.progress import slack_error
from adapters.slack.token_watch import TOKEN_GONE
from core import metrics
from core.config import HEALTH_PATH, READY_PATH, SlackSettings
from core.errors import BotError, cannot_listen
from core.http_retry import retry_after_s

log = structlog.get_logger(__name__)

EVENTS_PATH = "/slack/events"
JSON_TYPE = "application/json"
FORM_TYPE = "application/x-www-form-urlencoded"
# Slack refuses requests signed more than five minutes ago (replay protection).
SIGNATURE_MAX_AGE_S = 300
HTTP_SERVER_ERROR = 500
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_READ_CHUNK = 64 * 1024
# Fields Bolt reads, with the type it assumes, before any listener runs (and while routing or
# logging an unhandled request): another type there, null included, makes Bolt itself fail with
# a 500. Slack sends null for some of these (`enterprise`, `team` in org-wide installs): allowed.
_OBJECT_FIELDS = ("event", "view", "container", "message", "state")
_OBJECT_OR_STRING_FIELDS = ("team", "enterprise", "user", "channel")
_LIST_OF_OBJECTS_FIELDS = ("authorizations", "actions", "response_urls")
_EVENT_FIELDS: dict[str, type] = {
    "type": str,
    "subtype": str,
    "channel_type": str,
    "function_execution_id": str,
    "bot_access_token": str,
    "function": dict,
    "inputs": dict,
}
_VIEW_FIELDS: dict[str, type] = {
    "type": str,
    "callback_id": str,
    "team_id": str,
    "app_installed_team_id": str,
}
_FUNCTION_FIELDS: dict[str, type] = {"callback_id": str}
# Errors of `auth.test` (the bot token) and `apps.connections.open` (the app token) that mean
# the token itself is wrong, not that Slack is unwell: asking again would get the same.
_RATE_LIMITED = "ratelimited"
_TOKEN_REFUSED = TOKEN_GONE | {
    "missing_scope",
    "not_allowed_token_type",
    "no_permission",
    "team_access_not_granted",
    "ekm_access_denied",
}


class SlackAuthError(BotError):
    """Slack refused the bot token at start: the process stops before serving anything."""


class SlackUnreachable(BotError):
    """Slack's Web API could not be reached at start to check the token."""


@dataclass(frozen=True, slots=True)
class SlackService:
    """What `bot slack` serves: the Bolt app, the bot behind it (whose answers a shutdown waits
    for) and how to serve them."""

    bolt: AsyncApp
    bot: SlackBot
    signing_secret: str | None
    settings: SlackSettings
    metrics_path: str | None = None  # where Prometheus scrapes (HTTP mode); None: not served
    # Why the bot can't answer now (None: it can), asked at each GET /readyz.
    readiness: Callable[[], Awaitable[str | None]] | None = None
    # Beats for this process and apologises for killed processes' placeholders while it runs.
    leftovers: LeftoverSweeper | None = None


class _Refused(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class SlackHttpEndpoint:
    """The HTTP front of the Bolt app: validates each request cheaply, refuses with a 4xx and
    one log line, and hands Bolt only signed, well-formed requests."""

    def __init__(self, service: SlackService) -> None:
        if service.signing_secret is None:
            raise ValueError("HTTP mode needs the signing secret")
        self._service = service
        self._verifier = SignatureVerifier(service.signing_secret)
        self.draining = False

    def web_app(self) -> web.Application:
        app = web.Application(client_max_size=self._service.settings.max_body_bytes)
        app.router.add_route("*", EVENTS_PATH, self._events)
        app.router.add_get(HEALTH_PATH, self._health)
        app.router.add_get(READY_PATH, self._ready)
        if self._service.metrics_path:
            app.router.add_get(self._service.metrics_path, self._metrics)
        return app

    def runner(self) -> web.AppRunner:
        """The server as run in production: no access log (one line per health check and per
        event would bury the bot's own), aiohttp's own errors (an oversized header, a request
        that is not HTTP) as one short line, not a traceback. A connection that has not sent a
        whole request within `idle_connection_s` (idle, or its headers trickling in a byte at a
        time) is closed: aiohttp's keep-alive bound, which it applies from the connection's
        start, is an hour by default, and enough such connections would use up the process's
        file descriptors. A refused request's unread body is drained for `refused_linger_s`,
        not aiohttp's 10 s: its sender can read the refusal, and neither an endless body nor
        a shutdown waits on it longer."""
        settings = self._service.settings
        return web.AppRunner(
            self.web_app(),
            access_log=None,
            logger=one_line_logger("aiohttp.server"),
            keepalive_timeout=settings.idle_connection_s,
            lingering_time=settings.refused_linger_s,
        )

    async def _health(self, _: web.Request) -> web.Response:
        if self.draining:  # the platform's router stops sending us traffic
            return web.json_response({"ok": False, "draining": True}, status=503)
        return web.json_response({"ok": True})

    async def _ready(self, _: web.Request) -> web.Response:
        """Whether a question asked now would be answered from the docs: /healthz says only
        that the process is up, and an empty index (the docs never ingested on this machine)
        or an unreadable one answers every question with an apology. The reason is short and
        names no path or value: the port is public."""
        reason = "shutting down" if self.draining else None
        if reason is None and self._service.readiness is not None:
            reason = await self._service.readiness()
        if reason is not None:
            return web.json_response({"ok": False, "reason": reason}, status=503)
        return web.json_response({"ok": True})

    async def _metrics(self, _: web.Request) -> web.Response:
        body = generate_latest(metrics.REGISTRY)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _events(self, request: web.Request) -> web.StreamResponse:
        response = await self._answer_event(request)
        metrics.EVENT_ACKS.labels("slack", _kind(request), str(response.status)).inc()
        return response

    async def _answer_event(self, request: web.Request) -> web.StreamResponse:
        try:
            text = await self._checked_body(request)
            bolt_request = AsyncBoltRequest(
                body=text,
                query=request.query_string,
                headers=request.headers,  # type: ignore[arg-type]  # as in Bolt's own adapter
            )
        except _Refused as refused:
            return _refuse(request, refused)
        except Exception as exc:  # noqa: BLE001 (a body Bolt cannot read is the sender's fault)
            return _refuse(request, _Refused(400, f"unreadable: {type(exc).__name__}"))
        response = await self._service.bolt.async_dispatch(bolt_request)
        if response.status >= HTTP_SERVER_ERROR:  # Bolt failed on a body the front check let by
            return _refuse(request, _Refused(400, f"Bolt could not handle it ({response.status})"))
        return await to_aiohttp_response(response)

    async def _checked_body(self, request: web.Request) -> str:
        if self.draining:
            raise _Refused(503, "shutting down")
        if request.method != "POST":
            raise _Refused(405, f"method {request.method}")
        limit = self._service.settings.max_body_bytes
        if request.content_length is not None and request.content_length > limit:
            raise _Refused(413, f"over {limit} bytes")
        # Unsigned or stale: refused before a byte of the body is read.
        timestamp, signature = _signature_headers(request.headers)
        body = await _read_capped(request, limit, self._service.settings.body_read_deadline_s)
        try:
            text = body.decode("utf-8")  # what Slack signs; the verifier decodes it too
        except UnicodeDecodeError:
            raise _Refused(400, "not UTF-8") from None
        if not self._verifier.is_valid(text, timestamp, signature):
            raise _Refused(401, "wrong signature")
        if request.content_type not in (JSON_TYPE, FORM_TYPE):
            raise _Refused(415, f"content type {request.content_type[:40]!r}")
        if not text:
            raise _Refused(400, "empty body")
        _check_payload(text, request.content_type)
        return text


def _signature_headers(headers: Mapping[str, str]) -> tuple[str, str]:
    """The timestamp and signature, refused (401) when missing, not a plain number (the SDK's
    `int()` raises on `abc` and accepts `+17` or `1_700`) or older than Slack allows."""
    timestamp = headers.get("X-Slack-Request-Timestamp", "")
    signature = headers.get("X-Slack-Signature")
    if not signature:
        raise _Refused(401, "unsigned")
    if not _TIMESTAMP.fullmatch(timestamp):
        raise _Refused(401, "timestamp not a number")
    if abs(time.time() - int(timestamp)) > SIGNATURE_MAX_AGE_S:
        raise _Refused(401, "stale timestamp")
    return timestamp, signature


async def _read_capped(request: web.Request, limit: int, deadline_s: float) -> bytes:
    """The body, refused as soon as more than `limit` bytes arrived (a missing or false
    Content-Length, a compressed bomb) or when it arrives too slowly."""
    parts: list[bytes] = []
    received = 0
    try:
        async with asyncio.timeout(deadline_s):
            while chunk := await request.content.read(_READ_CHUNK):
                received += len(chunk)
                if received > limit:
                    raise _Refused(413, f"over {limit} bytes")
                parts.append(chunk)
    except TimeoutError:
        raise _Refused(408, f"body not received within {deadline_s:g} s") from None
    except web.HTTPException as exc:  # aiohttp's own refusal, e.g. an unknown content encoding
        raise _Refused(exc.status, exc.reason) from None
    except (ClientError, ValueError) as exc:  # a broken chunked or compressed body
        raise _Refused(400, f"unreadable body: {type(exc).__name__}") from None
    return b"".join(parts)


def _check_payload(text: str, content_type: str) -> None:
    """Parse as Bolt will (JSON when the type says so or the body starts with `{`, else a form
    whose `payload` field is JSON) and check the fields Bolt reads before any listener."""
    if content_type == JSON_TYPE or text.startswith("{"):
        body = _json_object(text, "body")
    else:
        form = dict(parse_qsl(text, keep_blank_values=True))
        if "payload" not in form:
            return  # a slash command or Slack's ssl_check: plain fields, Bolt routes them
        body = _json_object(form["payload"], "payload")
    kind = body.get("type")
    if not isinstance(kind, str) or not kind:
        raise _Refused(400, "no type")
    if kind == "url_verification" and not isinstance(body.get("challenge"), str):
        raise _Refused(400, "url_verification without a challenge")
    for name in _OBJECT_FIELDS:
        if name in body and not isinstance(body[name], dict):
            raise _Refused(400, f"{name} is not an object")
    for name in _OBJECT_OR_STRING_FIELDS:
        if body.get(name) is not None and not isinstance(body[name], dict | str):
            raise _Refused(400, f"{name} is not an object")
    for name in _LIST_OF_OBJECTS_FIELDS:
        value = body.get(name)
        if name in body and not (
            isinstance(value, list) and all(isinstance(v, dict) for v in value)
        ):
            raise _Refused(400, f"{name} is not a list of objects")
    if "actions" in body and not body["actions"]:
        raise _Refused(400, "actions is empty")  # Bolt reads the first action
    event = body.get("event", {})
    _check_fields(event, _EVENT_FIELDS, "event")
    _check_fields(event.get("function", {}), _FUNCTION_FIELDS, "event.function")
    _check_fields(body.get("view", {}), _VIEW_FIELDS, "view")


def _check_fields(value: dict[str, Any], types: dict[str, type], where: str) -> None:
    for name, expected in types.items():
        if name in value and not isinstance(value[name], expected):
            raise _Refused(400, f"{where}.{name} is not a {expected.__name__}")


def _json_object(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than Python's stack
        raise _Refused(400, f"{what} is not JSON") from None
    if not isinstance(value, dict):
        raise _Refused(400, f"{what} is not a JSON object")
    return value


def _kind(request: web.Request) -> str:
    """Events (JSON) or interactivity (a form): what the ack counter tells apart, from the
    declared type alone (the body may be anything)."""
    return {JSON_TYPE: "event", FORM_TYPE: "interaction"}.get(request.content_type, "other")


def _refuse(request: web.Request, refused: _Refused) -> web.Response:
    log.info(
        "slack_request_refused",
        status=refused.status,
        reason=refused.reason,
        method=request.method,
        path=request.path,
        declared_bytes=request.content_length,
    )
    response = web.json_response({"ok": False, "error": refused.reason}, status=refused.status)
    if refused.status in (408, 413):
        response.force_close()  # never read the rest of what the client is still sending
    if request.content.exception() is not None:
        # A body that failed to decode (not the gzip it says it is) is over: otherwise
        # aiohttp's lingering close reads it again after this response and logs the same
        # failure as an unhandled exception.
        request.content.feed_eof()
    return response


class _OneShortSlackLine(OneShortLine):
    """One short line (`OneShortLine`: no request body, no traceback whose values could hold
    one) that keeps a Slack API failure's error code: the part that tells an operator what is
    wrong."""

    def detail(self, failure: BaseException) -> str | None:
        return slack_error(failure) if isinstance(failure, SlackApiError) else None


def one_line_logger(name: str) -> logging.Logger:
    """A library logger whose records are one short line each, Slack's error codes kept."""
    return one_line_logs.one_line_logger(name, _OneShortSlackLine)


async def check_token(client: AsyncWebClient) -> None:
    """`auth.test` before serving: a refused token stops the process with one clear line. One
    attempt, no retry (whose log line would come before that one)."""
    once = AsyncWebClient(
        token=client.token, base_url=client.base_url, timeout=client.timeout, retry_handlers=[]
    )
    try:
        await once.auth_test()
    except SlackApiError as exc:
        error = slack_error(exc)
        if error in _TOKEN_REFUSED:
            raise SlackAuthError(
                f"SLACK_BOT_TOKEN was refused by Slack ({error}): copy the Bot User OAuth "
                "Token (xoxb-...) from the app's OAuth & Permissions page"
            ) from None
        raise SlackUnreachable(
            f"Slack's auth.test failed ({error}) at {client.base_url}: try again later"
        ) from None
    except (ClientError, TimeoutError, OSError) as exc:
        raise SlackUnreachable(
            f"Slack's Web API at {client.base_url} could not be reached "
            f"({type(exc).__name__}): check the network or slack.base_url"
        ) from None


async def run_http(
    service: SlackService,
    host: str,
    port: int,
    port_setting: str,
    on_listening: Callable[[str], None],
) -> None:
    """Serve until SIGTERM or SIGINT, then drain (see the module's docstring). `port_setting`
    names where the port was set, for the one line that says it can't be listened on."""
    async with _stop_on_signal() as stop:
        if service.settings.auth_check_at_start:
            await check_token(service.bolt.client)
        async with _sweeping(service.leftovers):
            await _serve_http(service, host, port, port_setting, on_listening, stop)


async def _serve_http(
    service: SlackService,
    host: str,
    port: int,
    port_setting: str,
    on_listening: Callable[[str], None],
    stop: asyncio.Event,
) -> None:
    endpoint = SlackHttpEndpoint(service)
    runner = endpoint.runner()
    await runner.setup()
    try:
        try:
            await web.TCPSite(runner, host, port).start()
        except OSError as exc:
            raise cannot_listen(
                host, port, exc, port_setting=port_setting, host_setting="slack.host"
            ) from None
        bound_host, bound_port = runner.addresses[0][:2]
        on_listening(f"listening on {bound_host}:{bound_port}")
        await stop.wait()
        endpoint.draining = True  # new requests get 503 while the answers finish
        await service.bot.drain()
    finally:
        await runner.cleanup()


async def run_socket_mode(
    service: SlackService, app_token: str, on_listening: Callable[[str], None]
) -> None:
    """Connect, serve until SIGTERM or SIGINT, then drain. The SDK's `connect` tries again for
    ever whatever the failure and never looks at the stop: here the stop ends the trying, and
    a refused app token stops the run and raises `SlackAuthError` (after the drain, when it
    was refused at a reconnection)."""
    async with _stop_on_signal() as stop:
        if service.settings.auth_check_at_start:
            await check_token(service.bolt.client)
        socket = _SocketConnection(
            service.bolt, app_token, stop, service.settings.rate_limited_wait_s
        )
        async with _sweeping(service.leftovers):
            try:
                if await _unless_stopped(socket.connect(), stop):
                    on_listening("connected to Slack in Socket Mode")
                    await stop.wait()
            finally:
                await socket.close()  # no new events
            await service.bot.drain()
        if socket.refusal is not None:
            raise socket.refusal


@asynccontextmanager
async def _sweeping(leftovers: LeftoverSweeper | None) -> AsyncIterator[None]:
    """The leftovers' heartbeat and looks (`adapters/slack/leftovers`) in the background while
    the block serves and drains: the start is never held up by them (a slow or failing store
    is logged there, never raised), and the heartbeat goes on until the last answer ended."""
    if leftovers is None:
        yield
        return
    task = asyncio.create_task(leftovers.run())
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


class _SocketConnection:
    """The SDK's Socket Mode handler, with the app token's refusal told apart from Slack being
    unwell. Each connection needs a URL from `apps.connections.open`; the SDK would log a
    refusal and ask again for ever. The first URL is asked before the handler exists (a
    refusal is then the process's one line: closing the handler would log another); later
    ones, at reconnections, through the SDK's `issue_new_wss_url`, replaced here."""

    def __init__(
        self, bolt: AsyncApp, app_token: str, stop: asyncio.Event, rate_limited_wait_s: float
    ) -> None:
        self._bolt = bolt
        self._app_token = app_token
        self._stop = stop
        self._rate_limited_wait_s = rate_limited_wait_s
        self._handler: AsyncSocketModeHandler | None = None
        self.refusal: SlackAuthError | None = None

    async def connect(self) -> None:
        url = await self._first_url()
        self._handler = AsyncSocketModeHandler(self._bolt, self._app_token)
        self._handler.client.wss_uri = url  # None: the SDK asks for one
        self._handler.client.issue_new_wss_url = self._later_url  # type: ignore[method-assign]
        await self._handler.connect_async()  # type: ignore[no-untyped-call]

    async def close(self) -> None:
        if self._handler is not None:
            await self._handler.close_async()  # type: ignore[no-untyped-call]

    async def _first_url(self) -> str | None:
        """None when Slack can't give one now: the SDK asks again at its own pace."""
        try:
            return await self._url()
        except (SlackApiError, ClientError, TimeoutError, OSError) as exc:
            reason = slack_error(exc) if isinstance(exc, SlackApiError) else type(exc).__name__
            log.warning("slack_socket_url_failed", error=reason)
            return None

    async def _later_url(self) -> str:
        try:
            return await self._url()
        except SlackAuthError as refusal:
            self.refusal = refusal
            self._stop.set()
            await asyncio.Event().wait()  # until the stopping run cancels this attempt
            raise

    async def _url(self) -> str:
        """A connection URL. Rate limited, it waits as long as Slack says (the SDK's own
        retry would ask again at its ping interval, which keeps the limit in force); a stop
        cancels the wait like any attempt."""
        while True:
            try:
                response = await self._bolt.client.apps_connections_open(app_token=self._app_token)
                return str(response["url"])
            except SlackApiError as exc:
                error = slack_error(exc)
                if error in _TOKEN_REFUSED:
                    raise SlackAuthError(
                        f"SLACK_APP_TOKEN was refused by Slack ({error}): copy an App-Level "
                        "Token (xapp-...) with the connections:write scope from the app's "
                        "Basic Information page"
                    ) from None
                if error != _RATE_LIMITED:
                    raise  # Slack unwell: worth asking again, at the SDK's pace
                header = exc.response.headers.get("Retry-After")
                wait = retry_after_s(header) or self._rate_limited_wait_s
                log.warning("slack_socket_url_rate_limited", retry_after_s=wait)
                await asyncio.sleep(wait)


async def _unless_stopped(work: Awaitable[object], stop: asyncio.Event) -> bool:
    """`work` run until it ends (True) or the stop comes first (False: `work` cancelled)."""
    task = asyncio.ensure_future(work)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (task, stopping):
            pending.cancel()
        await asyncio.wait({task, stopping})
    if task.cancelled():
        return False
    task.result()  # its failure, raised
    return True


@asynccontextmanager
async def _stop_on_signal() -> AsyncIterator[asyncio.Event]:
    """An event set by SIGTERM or SIGINT, the handlers in place before anything is served (a
    signal in between would otherwise kill the process with an interrupt, not a drain)."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    signals = (signal.SIGTERM, signal.SIGINT)

    def stopping() -> None:
        log.info("slack_stopping")
        stop.set()

    for signum in signals:
        loop.add_signal_handler(signum, stopping)
    try:
        yield stop
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)
