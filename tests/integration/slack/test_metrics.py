"""Prometheus metrics: served by the Slack HTTP server and, on `metrics.port`, by `bot discord`
and `bot clock`; every request acknowledged, every answer and every logged error counted."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time

import httpx
import pytest

from bench.common import metric_samples, metric_sum
from bot.logs import count_errors
from bot.wiring import metrics_server
from core import metrics
from core.config import Settings
from core.errors import ConfigError
from tests.integration.slack.conftest import SlackHarness
from tests.integration.slack.test_slack_app import answers, mention
from tests.integration.stalled_body import held_after_refusal


async def scrape(slack: SlackHarness) -> dict:
    async with slack.http.get(slack.url + "/metrics") as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        return metric_samples(await response.text())


async def test_the_slack_server_counts_acks_and_answers(slack: SlackHarness) -> None:
    before = await scrape(slack)
    assert await slack.event(mention("1700000000.009100"), "EvM1") == 200
    await slack.until(lambda: len(answers(slack)) == 1)
    assert await slack.post("{}", secret="not the signing secret") == 401
    after = await scrape(slack)

    def grew(name: str, **labels: str) -> float:
        return metric_sum(after, name, **labels) - metric_sum(before, name, **labels)

    assert grew("docbot_event_acks_total", platform="slack", kind="event", code="200") == 1
    assert grew("docbot_event_acks_total", platform="slack", kind="event", code="401") == 1
    assert grew("docbot_answers_total", platform="slack") == 1
    assert grew("docbot_answer_seconds_count", platform="slack") == 1


def test_a_logged_error_is_counted_by_platform_and_place() -> None:
    errors = metrics.ERRORS.labels("discord", "ask_failed")
    before = errors._value.get()
    event = {"event": "ask_failed", "platform": "discord"}
    assert count_errors(None, "error", dict(event)) == event  # passed on unchanged
    count_errors(None, "info", dict(event))  # not an error: not counted
    assert errors._value.get() == before + 1


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _on_port(settings: Settings, port: int, **more: object) -> Settings:
    return settings.model_copy(
        update={"metrics": settings.metrics.model_copy(update={"port": port, **more})}
    )


async def test_discord_and_the_clock_serve_metrics_on_their_port(settings: Settings) -> None:
    port = _free_port()
    metrics.HELD_BACK.labels("discord").inc()
    async with metrics_server(_on_port(settings, port)) as url, httpx.AsyncClient() as http:
        assert url == f"http://127.0.0.1:{port}/metrics"
        response = await http.get(url, timeout=10)
        assert response.headers["Content-Type"].startswith("text/plain")
        page = metric_samples(response.text)
        assert (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code == 404
        assert (await http.get(f"http://127.0.0.1:{port}/metrics/../x")).status_code == 404
    assert metric_sum(page, "docbot_answers_held_back_total", platform="discord") >= 1
    async with metrics_server(settings) as off:
        assert off is None


async def test_a_chat_process_without_a_port_of_its_own_serves_the_probes_there(
    settings: Settings,
) -> None:
    """`bot discord` (and Socket Mode) pass what readiness means for them: the metrics port
    then answers /healthz and /readyz as `bot slack --http` does."""
    port = _free_port()
    reasons: list[str | None] = [None, "not connected to Discord"]

    async def ready() -> str | None:
        return reasons.pop(0)

    async with metrics_server(_on_port(settings, port), ready), httpx.AsyncClient() as http:
        base = f"http://127.0.0.1:{port}"
        alive = await http.get(f"{base}/healthz", timeout=10)
        assert (alive.status_code, alive.json()) == (200, {"ok": True})
        assert (await http.get(f"{base}/readyz", timeout=10)).json() == {"ok": True}
        refused = await http.get(f"{base}/readyz", timeout=10)
        assert refused.status_code == 503
        assert refused.json() == {"ok": False, "reason": "not connected to Discord"}


async def test_an_idle_connection_to_the_metrics_port_is_closed(settings: Settings) -> None:
    """No thread per connection, and none held for ever: an idle one is closed."""
    port = _free_port()
    threads = threading.active_count()
    async with metrics_server(_on_port(settings, port, idle_connection_s=0.5)):
        idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(20)]
        assert threading.active_count() == threads
        for reader, writer in idle:
            assert await asyncio.wait_for(reader.read(), timeout=5) == b""  # closed by it
            writer.close()


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
async def test_a_refused_body_holds_its_connection_to_the_metrics_port_only_briefly(
    settings: Settings, declared: bool
) -> None:
    """A POST to the port's GET routes is a 405 whose body goes unread: drained for
    `refused_linger_s`, then the connection closes, and the server stops at once."""
    port = _free_port()
    stopping = 0.0
    async with metrics_server(_on_port(settings, port, refused_linger_s=0.5)) as url:
        assert url is not None
        held = await held_after_refusal(
            url, "/metrics", {}, body_bytes=1_000_000, declared=declared, status=405
        )
        assert held < 3
        stopping = time.monotonic()
    assert time.monotonic() - stopping < 3


async def test_a_port_in_use_is_a_config_error(settings: Settings) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError) as refused:
            async with metrics_server(_on_port(settings, port)):
                pass
    # Worded as `bot slack --http` words its own port in use, naming this server's setting.
    assert str(refused.value) == (
        f"port {port} is in use on 127.0.0.1: stop what listens there, or choose another "
        "port (metrics.port)"
    )


async def test_a_host_it_cannot_listen_on_names_both_settings(settings: Settings) -> None:
    unusable = settings.model_copy(
        update={"metrics": settings.metrics.model_copy(update={"host": "192.0.2.1", "port": 9})}
    )
    with pytest.raises(ConfigError) as refused:
        async with metrics_server(unusable):
            pass
    message = str(refused.value)
    assert message.startswith("cannot listen on 192.0.2.1:9 (")
    assert message.endswith("): check metrics.port and metrics.host")


async def test_a_request_that_is_not_http_is_one_log_line_not_a_traceback(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The port `bot clock`, `bot discord` and Socket Mode serve: a bad header (anyone can
    send one) printed aiohttp's parser traceback, where the Slack server's port logs one line."""
    server_log = logging.getLogger("aiohttp.server")
    monkeypatch.setattr(server_log, "filters", [])  # as in a process that never loaded Slack's
    port = _free_port()
    async with metrics_server(_on_port(settings, port)):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\nx")
        await writer.drain()
        assert b" 400 " in await asyncio.wait_for(reader.readline(), timeout=5)
        writer.close()
    [logged] = [r for r in caplog.records if r.name == "aiohttp.server"]
    assert logged.getMessage() == "Error handling request from 127.0.0.1: BadHttpMessage"
    assert logged.exc_info is None
    # The sender's mistake, answered 400: not an error of the bot's (every scan would alert).
    assert logged.levelno == logging.INFO
