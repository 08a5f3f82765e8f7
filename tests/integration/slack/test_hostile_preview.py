"""The answer preview (Slack's streaming messages, or the placeholder edited in place) shows model
output before its sources are known: whatever text the engine hands it, no link, URL or ping
reaches Slack, not even for the seconds until the checked answer replaces it. Driven through
the real slack_sdk client against the Slack emulator."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp.test_utils import TestServer
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.progress import AnswerProgressMessage
from tests.fakes.slack_api import SlackEmulator

# Partial answers as a model writes them: each one the previous plus more.
HOSTILE = "Read [the docs](https://evil.example/a), https://evil.example/b"
PARTIALS = [
    HOSTILE,
    HOSTILE + " or <https://evil.example/c|this>",
    HOSTILE + " or <https://evil.example/c|this> and www.evil.example <!channel> now.",
]


@pytest.fixture
async def emulator() -> AsyncIterator[tuple[SlackEmulator, AsyncWebClient]]:
    emulator = SlackEmulator()
    server = TestServer(emulator.app, host="127.0.0.1")
    await server.start_server()
    yield emulator, AsyncWebClient(token="xoxb-test", base_url=str(server.make_url("/api/")))
    await server.close()


def _progress(client: AsyncWebClient, *, stream: bool) -> AnswerProgressMessage:
    return AnswerProgressMessage(
        client,
        channel="C1",
        thread_ts="1700000000.000100",
        placeholder="1700000000.000200",
        team="T1",
        user="U2",
        use_stream_api=stream,
        update_interval_s=0,
        preview_chars=500,
    )


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "edit"])
async def test_the_preview_links_and_pings_nowhere(
    emulator: tuple[SlackEmulator, AsyncWebClient], stream: bool
) -> None:
    api, client = emulator
    progress = _progress(client, stream=stream)
    for partial in PARTIALS:
        await progress.update(partial)
    if stream:
        sent = [p["markdown_text"] for p in api.called("chat.startStream")]
        sent += [p["markdown_text"] for p in api.called("chat.appendStream")]
        assert len(sent) == len(PARTIALS)
        shown = "".join(sent)
    else:
        sent = [p["text"] for p in api.called("chat.update")]
        assert len(sent) == len(PARTIALS)
        shown = sent[-1]
    assert shown.startswith("Read the docs, (link removed) or this and (link removed) "), shown
    for text in sent:
        assert "evil.example" not in text
        assert "](" not in text
        assert "<" not in text  # no Slack control sequence (link, ping) either
