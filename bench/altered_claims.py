"""How many of a lying model's one-word alterations reach the person asking as its answer.

A stand-in of llama-server (`tests/fakes/llama_server.py`, `AlteringModel`) answers each question
by copying one sentence of its passages, cited, with one word turned round ("enable" for
"disable", "input" for "output", "all" for "some"): plausible, cited and wrong, the claim a
word-overlap check finds hardest. The product answers as with any model that can't call tools
(search-then-answer, held to its passages by `grounding`), and each answer is looked at for the
altered sentence in what it shows as the model's answer (before the passages quoted after it).
With no model the answer is the quoted passages, which say no such thing: every altered sentence
shown is an answer worse than none. The same sentences copied as they stand (`faithful` in the
results) show what the check keeps of an honest answer.

The pairs are counted apart: those the check knows as opposites (`_OPPOSITE_PAIRS` in
`core/answer/grounding.py`) measure it holding; the others (a swap of two words the same
sentence holds, a pair it has no entry for) what it can't see. The Anthropic docs QA set's
corpus is indexed once into `.bot/bench/altered/`.

    .venv/bin/python -m bench.altered_claims [--limit 100]
"""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter
from typing import Any

from bench.common import REPO, SHARED_EVAL, bench_settings, write_result
from bot.runtime import opened
from bot.wiring import build_embedder
from core.answer.engine import AnswerEngine
from core.answer.grounding import opposed
from core.answer.holding import ALSO_QUOTED
from core.domain.conversation import AnswerMode, ChannelKind, Question
from core.evaluation.retrieval import load_dataset
from core.evaluation.runs import index_dataset, isolated_settings
from tests.fakes.llama_server import AlteringModel, LlamaServer

DATASET = SHARED_EVAL / "anthropic_docs_qa"
SCRATCH = REPO / ".bot" / "bench" / "altered"


async def shown_alterations(
    engine: AnswerEngine, questions: list[str], model: AlteringModel
) -> dict[str, Any]:
    """Each question answered by `engine` (whose model is `model`'s server): how many altered
    sentences the model wrote, and how many the answers show as theirs, per pair."""
    told: Counter[str] = Counter()
    shown: Counter[str] = Counter()
    examples: list[dict[str, str]] = []
    for text in questions:
        answer = await engine.answer(
            Question("bench", f"bench/{text}", "u", text, ChannelKind.DIRECT)
        )
        if text not in model.told:
            continue
        lie, pair = model.told[text]
        name = "/".join(pair)
        told[name] += 1
        written = answer.text.split(ALSO_QUOTED)[0]
        if answer.mode is not AnswerMode.EXTRACTIVE and lie.rstrip(".") in written:
            shown[name] += 1
            examples.append({"question": text, "shown": lie})
    known = [name for name in told if opposed(*name.split("/"))]
    return {
        "questions": len(questions),
        "altered": sum(told.values()),
        "shown": sum(shown.values()),
        # Of the pairs the check reads as opposites: what it is there to catch.
        "altered_known": sum(told[name] for name in known),
        "shown_known": sum(shown[name] for name in known),
        "by_pair": {name: {"altered": n, "shown": shown[name]} for name, n in told.most_common()},
        "examples": examples[:5],
    }


async def run(limit: int | None, *, alter: bool) -> dict[str, Any]:
    model = AlteringModel(alter=alter)
    server = LlamaServer(model).start()
    try:
        SCRATCH.mkdir(parents=True, exist_ok=True)
        env = {"BOT_ANSWERS__PROVIDER": "openai", "BOT_OPENAI__BASE_URL": server.url}
        settings = bench_settings(SCRATCH, BOT_OPENAI__MODEL="altering", **env)
        data = load_dataset(DATASET, limit)
        scoped = isolated_settings(settings, data.name, SCRATCH)
        embedder = build_embedder(scoped)
        async with opened(scoped, SCRATCH / "index.sqlite", embedder=embedder) as runtime:
            await index_dataset(data, runtime.backend.index, embedder, scoped)
            questions = list(data.queries.values())
            return await shown_alterations(runtime.engine(), questions, model)
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, help="only the first N questions")
    args = parser.parse_args()
    result = asyncio.run(run(args.limit, alter=True))
    faithful = asyncio.run(run(args.limit, alter=False))
    print(f"altered sentences written: {result['altered']} of {result['questions']} answers")
    print(f"shown to the person asking as the answer: {result['shown']}")
    known = f"{result['shown_known']} of {result['altered_known']}"
    print(f"  of the pairs the check reads as opposites: {known}")
    for name, counts in result["by_pair"].items():
        print(f"  {name}: {counts['shown']} of {counts['altered']} shown")
    kept = f"{faithful['shown']} of {faithful['altered']}"
    print(f"the same sentences copied as they stand: {kept} shown")
    result["faithful"] = {key: faithful[key] for key in ("altered", "shown", "by_pair")}
    print(f"wrote {write_result('altered-claims.json', result)}")


if __name__ == "__main__":
    main()
