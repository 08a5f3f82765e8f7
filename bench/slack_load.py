"""Slack under load: 50 @mentions arrive at once while the model takes 2 s per answer.

Real parts: the Bolt AsyncApp served over HTTP on loopback, signed event requests, the real
slack_sdk client posting to the local Slack Web API emulator used by the tests, the real
`anthropic` SDK streaming from a scripted model (two turns of 1 s each: search, then respond),
the real index of the bundled docs. Measured: how long each event takes to be acknowledged
(HTTP 200), whether every question gets its final answer, and the wall time for all of them.

    python -m bench.slack_load [--questions 50] [--runs 3] [--model-seconds 2]
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx2

from bench.common import (
    MetricsPage,
    latency_summary,
    load_bench_main,
    metric_samples,
    metric_sum,
)
from bot.logs import configure_logging
from core.answer.claude import ClaudeModel
from core.answer.tools import RESPOND_TOOL, SEARCH_TOOL
from core.search.embedder import MiniLMEmbedder
from tests.fakes.anthropic_api import message, sse, tool_use
from tests.fakes.slack_api import BOT_USER
from tests.integration.answers.helpers import build_kb, first_sentence, sources_in
from tests.integration.slack.conftest import make_harness_factory

QUESTIONS = [
    "How do I re-ingest changed documents?",
    "What does --prune delete?",
    "How are citations checked?",
    "Which formats can be ingested?",
    "What is hybrid search?",
]


def scripted_model(turn_seconds: float) -> anthropic.AsyncAnthropic:
    """Stateless: searches when the conversation has no tool result yet, else responds."""

    async def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        await asyncio.sleep(turn_seconds)
        last = body["messages"][-1]["content"]
        results = (
            [b for b in last if isinstance(b, dict) and b.get("type") == "tool_result"]
            if isinstance(last, list)
            else []
        )
        if not results:
            reply = message(tool_use(SEARCH_TOOL, query=str(last)[:200]))
        else:
            number, passage = next(iter(sources_in(results[0]["content"]).items()))
            reply = message(
                tool_use(
                    RESPOND_TOOL,
                    answer=f"Here is what the docs say [{number}].",
                    status="answered",
                    citations=[{"source": number, "quote": first_sentence(passage)}],
                )
            )
        return httpx2.Response(
            200, content=sse(reply), headers={"content-type": "text/event-stream"}
        )

    return anthropic.AsyncAnthropic(
        api_key="bench",
        base_url="http://anthropic.bench",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )


async def one_run(data_dir: Path, questions: int, model_seconds: float) -> dict[str, Any]:
    minilm = MiniLMEmbedder(batch_size=32, max_tokens=256, threads=0)
    kb = await asyncio.to_thread(build_kb, data_dir / "kb", minilm)  # it runs its own loop
    agent = ClaudeModel(
        scripted_model(model_seconds / 2),
        model="scripted",
        max_tokens=1024,
    )
    start = make_harness_factory(kb, minilm, data_dir / "state")
    slack, stop = await start(agent, BOT_LOGGING__LEVEL="WARNING")
    configure_logging(slack.settings.logging)

    async def send(n: int) -> tuple[int, float]:
        event = {
            "type": "app_mention",
            "user": f"U{n}",
            "channel": "C1",
            "ts": f"1700001000.{n:06d}",
            "text": f"<@{BOT_USER}> {QUESTIONS[n % 5]}",
        }
        started = time.perf_counter()
        status = await slack.event(event, f"EvLoad{n}")
        return status, (time.perf_counter() - started) * 1000

    def finals() -> int:
        return sum(1 for u in slack.emulator.called("chat.update") if u.get("blocks"))

    async def scrape() -> MetricsPage:
        async with slack.http.get(slack.url + "/metrics") as response:
            return metric_samples(await response.text())

    try:
        await send(10_000)  # warm-up: auth.test, first query embedding
        await slack.until(lambda: finals() == 1, timeout=30)
        before = await scrape()
        started = time.perf_counter()
        acks = await asyncio.gather(*(send(n) for n in range(questions)))
        with contextlib.suppress(AssertionError):
            await slack.until(lambda: finals() == questions + 1, timeout=60)
        wall = time.perf_counter() - started
        answered = finals() - 1
        after = await scrape()
    finally:
        await stop()

    def counted(name: str, **labels: str) -> int:
        return round(metric_sum(after, name, **labels) - metric_sum(before, name, **labels))

    ack_ms = [ms for _, ms in acks]
    return {
        "statuses": sorted({status for status, _ in acks}),
        **latency_summary("ack_ms", ack_ms),
        "answered": answered,
        "wall_s": round(wall, 2),
        # /metrics scraped before and after the burst: what the process itself counted.
        "metrics_event_acks": counted("docbot_event_acks_total", platform="slack", code="200"),
        "metrics_answers": counted("docbot_answers_total", platform="slack"),
        "metrics_answer_seconds_count": counted("docbot_answer_seconds_count", platform="slack"),
    }


async def main() -> None:
    await load_bench_main(__doc__, "slack", one_run, "ack_ms_p99")


if __name__ == "__main__":
    asyncio.run(main())
