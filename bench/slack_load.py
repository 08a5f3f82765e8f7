"""Slack under load: 50 @mentions arrive at once while the model takes 2 s per answer.

Real parts: the Bolt AsyncApp served over HTTP on loopback, signed event requests, the real
slack_sdk client posting to the local Slack Web API emulator used by the tests, the real
`anthropic` SDK streaming from a scripted model (two turns of 1 s each: search, then respond),
the real index of the bundled docs. Measured: how long each event takes to be acknowledged
(HTTP 200), whether every question gets its final answer, and the wall time for all of them.

    python -m bench.slack_load [--questions 50] [--runs 3] [--model-seconds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx2
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from slack_sdk.signature import SignatureVerifier

from adapters.slack.server import EVENTS_PATH, http_app
from bench.common import REPO, percentile, write_result
from bot.logs import configure_logging
from bot.wiring import build_embedder, build_index, build_slack_app, build_store
from core.claude_agent import ClaudeAgent
from core.config import load_settings
from core.engine import AnswerEngine
from core.ingest import Ingestor
from core.tools import RESPOND_TOOL, SEARCH_TOOL
from tests.fakes.anthropic_api import message, sse, tool_use
from tests.fakes.slack_api import BOT_USER, TEAM, SlackEmulator
from tests.integration.answers.helpers import first_sentence, sources_in
from tests.integration.slack.conftest import SECRET

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
    emulator = SlackEmulator()
    api = TestServer(emulator.app, host="127.0.0.1")
    await api.start_server()
    settings = load_settings(
        REPO / "config.yaml",
        environ={
            "BOT_STORAGE__DATA_DIR": str(data_dir),
            "BOT_EMBEDDINGS__CACHE_PATH": str(REPO / ".bot" / "embedding-cache.sqlite"),
            "BOT_SLACK__BASE_URL": str(api.make_url("/api/")),
            "SLACK_BOT_TOKEN": "xoxb-bench",
            "SLACK_SIGNING_SECRET": SECRET,
            "BOT_LOGGING__LEVEL": "WARNING",
        },
    )
    configure_logging(settings.logging)
    embedder = build_embedder(settings)
    index = build_index(settings, embedder)
    await Ingestor(index, embedder, settings.ingest).ingest([str(REPO / "docs")], source="kb")
    store = build_store(settings)
    agent = ClaudeAgent(
        scripted_model(model_seconds / 2),
        model="scripted",
        max_tokens=1024,
        max_rounds=4,
        tool_timeout_s=20,
    )
    engine = AnswerEngine(
        index=index,
        store=store,
        settings=settings.answers,
        top_k=settings.search.top_k,
        claude=agent,
    )
    server = TestServer(
        http_app(build_slack_app(settings, engine, store, socket_mode=False)), host="127.0.0.1"
    )
    await server.start_server()
    url = str(server.make_url(EVENTS_PATH))
    verifier = SignatureVerifier(SECRET)

    async def send(http: ClientSession, n: int) -> tuple[int, float]:
        ts = f"1700001000.{n:06d}"
        payload = json.dumps(
            {
                "type": "event_callback",
                "team_id": TEAM,
                "api_app_id": "A1",
                "event_id": f"EvLoad{n}",
                "event_time": int(time.time()),
                "authorizations": [{"team_id": TEAM, "user_id": BOT_USER, "is_bot": True}],
                "event": {
                    "type": "app_mention",
                    "user": f"U{n}",
                    "channel": "C1",
                    "ts": ts,
                    "text": f"<@{BOT_USER}> {QUESTIONS[n % len(QUESTIONS)]}",
                },
            }
        )
        stamp = str(int(time.time()))
        headers = {
            "X-Slack-Request-Timestamp": stamp,
            "Content-Type": "application/json",
            "X-Slack-Signature": verifier.generate_signature(timestamp=stamp, body=payload),
        }
        started = time.perf_counter()
        async with http.post(url, data=payload, headers=headers) as response:
            return response.status, (time.perf_counter() - started) * 1000

    def finals() -> int:
        return sum(1 for u in emulator.called("chat.update") if u.get("blocks"))

    async with ClientSession() as http:
        await send(http, 10_000)  # warm-up: auth.test, first query embedding
        while finals() < 1:
            await asyncio.sleep(0.05)
        started = time.perf_counter()
        acks = await asyncio.gather(*(send(http, n) for n in range(questions)))
        while finals() < questions + 1 and time.perf_counter() - started < 60:
            await asyncio.sleep(0.02)
        wall = time.perf_counter() - started
    answered = finals() - 1
    await server.close()
    await api.close()
    await engine.close()
    await index.close()
    ack_ms = [ms for _, ms in acks]
    return {
        "statuses": sorted({status for status, _ in acks}),
        "ack_ms_p50": round(statistics.median(ack_ms), 1),
        "ack_ms_p99": round(percentile(ack_ms, 99), 1),
        "ack_ms_max": round(max(ack_ms), 1),
        "answered": answered,
        "wall_s": round(wall, 2),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--model-seconds", type=float, default=2.0)
    args = parser.parse_args()
    runs = []
    for n in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="bench-slack-") as tmp:
            runs.append(await one_run(Path(tmp), args.questions, args.model_seconds))
        print(f"run {n + 1}: {runs[-1]}")
    result = {
        "questions": args.questions,
        "model_seconds_per_answer": args.model_seconds,
        "runs": runs,
        "ack_ms_p99_median": statistics.median(r["ack_ms_p99"] for r in runs),
        "wall_s_median": statistics.median(r["wall_s"] for r in runs),
        "all_answered": all(r["answered"] == args.questions for r in runs),
    }
    path = write_result("slack-load.json", result)
    print(
        f"ack p99 {result['ack_ms_p99_median']} ms, wall {result['wall_s_median']} s, "
        f"all answered: {result['all_answered']} -> {path}"
    )


if __name__ == "__main__":
    asyncio.run(main())
