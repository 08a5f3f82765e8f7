"""The core's own time per answer, with a scripted model that answers instantly.

Everything but the model and the tools (search) is ours: building requests, parsing responses,
validating tool input, numbering sources, checking citations, loading and storing turns. The
model is the real `anthropic` SDK talking to the scripted fake Messages API used by the tests
(search, then respond citing a real quote), so the SDK's own overhead counts as model time.

    python -m bench.answer_overhead [--runs 5] [--questions 100]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench.common import REPO, SHARED_EVAL, bench_settings, percentile, write_result
from bot.wiring import build_embedder, open_backend
from core.answer.claude import ClaudeModel
from core.answer.engine import AnswerEngine
from core.answer.tools import RESPOND_TOOL, SEARCH_TOOL
from core.backends.sqlite.conversation_store import SqliteConversationStore
from core.domain.conversation import ChannelKind, Question
from core.evaluation.retrieval import load_dataset, prepared_corpus
from core.ingest.pipeline import Ingestor, IngestReport
from tests.fakes.anthropic_api import FakeMessagesAPI, message, tool_results, tool_use
from tests.integration.answers.helpers import first_sentence, sources_in


def script(questions: list[str]) -> list[Any]:
    def respond(body: dict[str, Any]) -> dict[str, Any]:
        number, passage = next(iter(sources_in(tool_results(body)[0]["content"]).items()))
        return message(
            tool_use(
                RESPOND_TOOL,
                answer=f"Here is what the docs say [{number}].",
                citations=[{"source": number, "quote": first_sentence(passage)}],
                status="answered",
            )
        )

    steps: list[Any] = []
    for text in questions:
        steps += [message(tool_use(SEARCH_TOOL, query=text[:200])), respond]
    return steps


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--questions", type=int, default=100)
    args = parser.parse_args()
    data = load_dataset(SHARED_EVAL / "anthropic_docs_qa", args.questions)
    questions = list(data.queries.values())
    with tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
        settings = bench_settings(REPO / ".bot")  # the shared embedding cache
        embedder = build_embedder(settings)
        backend = await open_backend(settings, embedder, Path(tmp) / "index.sqlite")
        index = backend.index
        await Ingestor(index, embedder, settings.ingest).write(
            prepared_corpus(data, settings.ingest, "bench"), {}, IngestReport()
        )
        p50s, p95s, totals = [], [], []
        for run in range(args.runs):
            api = FakeMessagesAPI(script(questions))
            agent = ClaudeModel(api.client(), model="scripted", max_tokens=1024)
            store = SqliteConversationStore(Path(tmp) / f"state{run}.sqlite", 5_000)
            engine = AnswerEngine(
                index=index,
                store=store,
                settings=settings.answers,
                top_k=settings.search.top_k,
                model=agent,
            )
            own = []
            for n, text in enumerate(questions):
                answer = await engine.answer(
                    Question("bench", f"bench/{run}/{n}", "u", text, ChannelKind.DIRECT)
                )
                assert answer.citations, (answer.status, answer.text, answer.trace.notes)
                own.append(answer.trace.own_seconds * 1000)
                totals.append(answer.trace.total_seconds * 1000)
            api.check()
            await store.close()
            p50s.append(statistics.median(own))
            p95s.append(percentile(own, 95))
            print(f"run {run + 1}: own time p50 {p50s[-1]:.2f} ms, p95 {p95s[-1]:.2f} ms")
        await backend.close()
    result = {
        "questions": len(questions),
        "runs": args.runs,
        "own_ms_p50_median": round(statistics.median(p50s), 2),
        "own_ms_p95_median": round(statistics.median(p95s), 2),
        "own_ms_p95_runs": [round(x, 2) for x in p95s],
        "total_ms_p50": round(statistics.median(totals), 2),
    }
    path = write_result("answer-overhead.json", result)
    print(
        f"own time p50 {result['own_ms_p50_median']} ms, p95 {result['own_ms_p95_median']} ms "
        f"(median of {args.runs} runs) -> {path}"
    )


if __name__ == "__main__":
    asyncio.run(main())
