"""Discord under load: 50 `/ask` at once while the model takes 2 s per answer.

Real parts: discord.py's client, command tree, interaction and webhook machinery, its REST
client pointed at the local Discord emulator used by the tests, the real `anthropic` SDK
streaming from a scripted model (two turns of 1 s), the real index of the bundled docs. Measured:
how long after its arrival each interaction is deferred (Discord allows 3 s), and whether every
question gets its answer.

    python -m bench.discord_load [--questions 50] [--runs 3] [--model-seconds 2]
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

import pytest

from bench.common import latency_summary, load_bench_main
from bench.slack_load import QUESTIONS, scripted_model
from core.answer.claude import ClaudeModel
from core.search.embedder import MiniLMEmbedder
from tests.integration.answers.helpers import build_kb
from tests.integration.discord.conftest import ask_payload, make_discord_factory


async def one_run(data_dir: Path, questions: int, model_seconds: float) -> dict[str, Any]:
    minilm = MiniLMEmbedder(batch_size=32, max_tokens=256, threads=0)
    kb = await asyncio.to_thread(build_kb, data_dir / "kb", minilm)  # it runs its own loop
    agent = ClaudeModel(
        scripted_model(model_seconds / 2),
        model="scripted",
        max_tokens=1024,
    )
    with pytest.MonkeyPatch.context() as monkeypatch:
        start = make_discord_factory(kb, minilm, data_dir / "state", monkeypatch)
        discord_bot, stop = await start(agent)
        emulator = discord_bot.emulator

        def answered() -> int:
            # An /ask is done when its answer is posted and its thread opened.
            return len(emulator.threads)

        try:
            discord_bot.interaction(ask_payload(QUESTIONS[0]))  # warm-up
            await discord_bot.until(lambda: answered() == 1, timeout=30)
            arrivals: dict[str, float] = {}
            started = time.perf_counter()
            for n in range(questions):
                payload = ask_payload(QUESTIONS[n % len(QUESTIONS)])
                arrivals[payload["id"]] = time.perf_counter()
                discord_bot.interaction(payload)
            with contextlib.suppress(AssertionError):
                await discord_bot.until(lambda: answered() == questions + 1, timeout=60)
            wall = time.perf_counter() - started
            await asyncio.sleep(0.5)  # let each /ask record its thread before closing the store
            defer_ms = [
                (at - arrivals[path.split("/")[2]]) * 1000
                for (method, path, _), at in zip(emulator.calls, emulator.times, strict=True)
                if method == "POST"
                and path.endswith("/callback")
                and path.split("/")[2] in arrivals
            ]
        finally:
            await stop()
    return {
        "deferred": len(defer_ms),
        **latency_summary("defer_ms", defer_ms),
        "answered": answered() - 1,
        "wall_s": round(wall, 2),
    }


async def main() -> None:
    await load_bench_main(__doc__, "discord", one_run, "defer_ms_p99")


if __name__ == "__main__":
    asyncio.run(main())
