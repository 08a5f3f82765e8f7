"""An `auto` Slack channel under load: 20 messages a second for 30 s, one in ten a question.

Real parts, as in `bench.slack_load`: the Bolt app over HTTP on loopback, signed requests, the
Slack Web API emulator, the real `anthropic` SDK streaming from a scripted model (two turns of
`--model-seconds / 2` each), the real index of the bundled docs, and the channel's policy
`trigger: auto` as shipped: the question detector, the relevance floor and grounded-only
answers. The messages are the labelled chat messages of `tests/data/chat_messages.jsonl`:
questions and non-questions drawn in turn, so every kind of chatter in it is sent. Which of the
questions the bundled docs answer is judged in `tests/data/bundled_docs_questions.json`.
Measured: each event's acknowledgement; whether every grounded question was answered; how many
other questions were (the scripted model cites whatever it is given, so these are the ones the
floor let through to it); and how many non-questions were (by the set they came from).

    python -m bench.auto_channel [--rate 20] [--seconds 30] [--question-share 0.1] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import (
    BUNDLED_DOCS_QUESTIONS,
    bundled_docs_labels,
    chat_messages,
    latency_summary,
    write_result,
)
from bench.slack_load import scripted_model
from bot.logs import configure_logging
from core.answer.claude import ClaudeModel
from core.config import LoggingSettings
from core.search.embedder import MiniLMEmbedder
from tests.integration.answers.helpers import build_kb
from tests.integration.slack.conftest import make_harness_factory


def grounded_questions(drawn: int) -> set[str]:
    """The questions the bundled docs answer, among the first `drawn`; only a judged prefix
    can be measured."""
    judged, grounded = bundled_docs_labels()
    if drawn > judged:
        raise SystemExit(
            f"{drawn} questions drawn, but only the first {judged} are judged "
            f"in {BUNDLED_DOCS_QUESTIONS}"
        )
    return grounded


def _messages(total: int, question_share: float) -> list[dict[str, Any]]:
    rows = chat_messages()
    questions = itertools.cycle([r for r in rows if r["answer"]])
    chatter = itertools.cycle([r for r in rows if not r["answer"]])
    every = round(1 / question_share)
    return [next(questions) if n % every == 0 else next(chatter) for n in range(total)]


async def one_run(
    data_dir: Path, rate: float, seconds: float, question_share: float, model_seconds: float
) -> dict[str, Any]:
    minilm = MiniLMEmbedder(batch_size=32, max_tokens=256, threads=0)
    kb = await asyncio.to_thread(build_kb, data_dir / "kb", minilm)
    agent = ClaudeModel(scripted_model(model_seconds / 2), model="scripted", max_tokens=1024)
    policies = json.dumps({"slack/T1/C1": {"trigger": "auto"}})
    start = make_harness_factory(kb, minilm, data_dir / "state")
    slack, stop = await start(agent, BOT_LOGGING__LEVEL="WARNING", BOT_CHANNELS__POLICIES=policies)
    messages = _messages(round(rate * seconds), question_share)
    grounded = grounded_questions(sum(1 for r in messages if r["answer"]))

    async def send(n: int, row: dict[str, Any]) -> tuple[int, float]:
        event = {
            "type": "message",
            "channel_type": "channel",
            "user": f"U{n % 40}",
            "channel": "C1",
            "ts": f"1700002000.{n:06d}",
            "text": row["text"],
        }
        started = time.perf_counter()
        status = await slack.event(event, f"EvAuto{n}")
        return status, (time.perf_counter() - started) * 1000

    def answered_threads() -> set[str]:
        return {m["thread_ts"] for m in slack.emulator.called("chat.postMessage")}

    try:
        tasks = []
        started = time.perf_counter()
        for n, row in enumerate(messages):
            delay = started + n / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(send(n, row)))
        acks = await asyncio.gather(*tasks)
        questions = {f"1700002000.{n:06d}" for n, r in enumerate(messages) if r["answer"]}
        must = {f"1700002000.{n:06d}" for n, r in enumerate(messages) if r["text"] in grounded}
        with contextlib.suppress(AssertionError):
            await slack.until(lambda: must <= answered_threads(), timeout=120)
        # Answers other questions may still be writing: wait until nothing moves for longer
        # than one answer takes.
        seen = -1
        while seen != (seen := len(await slack.state.answer_log(0))):
            await slack.settle(2 * model_seconds + 0.5)
        wall = time.perf_counter() - started
        answered = answered_threads()
        held_back = sum(not e.posted for e in await slack.state.answer_log(0))
    finally:
        await stop()
    ack_ms = [ms for _, ms in acks]
    by_set: dict[str, int] = {}
    for n, row in enumerate(messages):
        if not row["answer"] and f"1700002000.{n:06d}" in answered:
            by_set[row["set"]] = by_set.get(row["set"], 0) + 1
    return {
        "messages": len(messages),
        "questions": len(questions),
        "statuses": sorted({status for status, _ in acks}),
        **latency_summary("ack_ms", ack_ms),
        "questions_answered": len(questions & answered),
        "grounded_questions": len(must),
        "grounded_questions_answered": len(must & answered),
        "other_questions_answered": len((questions - must) & answered),
        "held_back": held_back,
        "non_questions_answered": sum(by_set.values()),
        "non_questions_answered_by_set": by_set,
        "wall_s": round(wall, 2),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--question-share", type=float, default=0.1)
    parser.add_argument("--model-seconds", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    # Configured here, not per run: a test calls `one_run`, and logging is the process's.
    configure_logging(LoggingSettings(level="WARNING"))
    runs = []
    for n in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="bench-auto-") as tmp:
            runs.append(
                await one_run(
                    Path(tmp), args.rate, args.seconds, args.question_share, args.model_seconds
                )
            )
        print(f"run {n + 1}: {runs[-1]}")
    result = {
        "rate_per_s": args.rate,
        "seconds": args.seconds,
        "model_seconds_per_answer": args.model_seconds,
        "runs": runs,
        "ack_ms_p99_median": statistics.median(r["ack_ms_p99"] for r in runs),
        "ack_ms_p50_median": statistics.median(r["ack_ms_p50"] for r in runs),
        "all_grounded_questions_answered": all(
            r["grounded_questions_answered"] == r["grounded_questions"] for r in runs
        ),
        "other_questions_answered_median": statistics.median(
            r["other_questions_answered"] for r in runs
        ),
        "non_questions_answered_median": statistics.median(
            r["non_questions_answered"] for r in runs
        ),
    }
    path = write_result("auto-channel-load.json", result)
    print(
        f"ack p99 {result['ack_ms_p99_median']} ms, every grounded question answered: "
        f"{result['all_grounded_questions_answered']}, other questions answered (median): "
        f"{result['other_questions_answered_median']}, non-questions answered (median): "
        f"{result['non_questions_answered_median']} -> {path}"
    )


if __name__ == "__main__":
    asyncio.run(main())
