"""Does the bot learn? A scripted replay of web-learned topics, then related questions.

Data: the Anthropic docs QA set (real questions with gold passages). A topic and its related
question are two *different* questions whose gold passages overlap (the set has 31 disjoint
such pairs). The knowledge base is the bundled docs (about this bot), which answers none of them.

Everything but the model and the web is the product: the engine, its tools and their rules, the
real `anthropic` SDK (against the scripted Messages API of the tests), the real httpx client
(against the local Perplexity stand-in, which returns the question's gold passages as web pages:
URL, heading as title, text), the SQLite index, the embedder, the keyword store.

The scripted model follows one policy for every question: search the knowledge base with the
question's own words; if a retrieved passage holds a gold passage, answer citing it; otherwise
search the web (the question as the query), and answer citing the web pages. It never calls
save_keywords, so every keyword is the one the loop derives from the page titles: the floor of
what a real model, told to write specific keywords, would save. Whether a retrieved passage
"holds the gold" is an oracle (its text contains the gold passage's first sentence): a real model
judges by reading, so the figure measures whether learned knowledge comes back, not judgement.

Phase 1 asks the topics (each learns from the web); phase 2 asks the related questions, each in a
new conversation. The figure: the share of related questions answered from learned knowledge
without a web search. `--no-keywords` gives the keyword field no BM25 weight (an ablation: how
much the saved keywords add over the learned text alone).

    python -m bench.learning_replay [--topics 20] [--runs 3] [--no-keywords]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import itertools
import json
import re
import statistics
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.common import REPO, SHARED_EVAL, bench_settings, write_result
from bot.wiring import build_embedder, build_knowledge, open_backend
from core.answer.claude import ClaudeModel
from core.answer.engine import AnswerEngine
from core.answer.tools import MAX_QUERY_CHARS, RESPOND_TOOL, SEARCH_TOOL, WEB_SEARCH_TOOL
from core.answer.web_research import WebLearning
from core.backends.sqlite.conversation_store import SqliteConversationStore
from core.config import Settings
from core.domain.conversation import Answer, ChannelKind, Question, SourceKind
from core.ingest.pipeline import Ingestor
from core.learning.perplexity import PerplexitySearch
from tests.fakes.anthropic_api import FakeMessagesAPI, message, respond_quoting, tool_use
from tests.fakes.perplexity_api import API_KEY, Page, completion, perplexity_server
from tests.integration.answers.helpers import first_sentence

DATA = SHARED_EVAL / "anthropic_docs_qa"
_SOURCE = re.compile(r'<source id="(\d+)"([^>]*)>\n(.*?)\n</source>', re.DOTALL)
_MAX_STEPS = 10_000  # model turns the scripted API will serve in one run


@dataclass(frozen=True)
class Pair:
    topic: str
    related: str
    shared: tuple[str, ...]  # gold passage ids of both


@dataclass(frozen=True)
class Corpus:
    questions: dict[str, str]  # id -> text
    gold: dict[str, list[str]]  # question id -> passage ids
    passages: dict[str, dict[str, str]]  # id -> {"title", "text"}


def load_corpus() -> Corpus:
    questions = {}
    for line in (DATA / "queries.jsonl").read_text().splitlines():
        q = json.loads(line)
        questions[q["_id"]] = q["text"]
    gold: dict[str, list[str]] = defaultdict(list)
    with (DATA / "qrels.tsv").open() as rows:
        for row in csv.DictReader(rows, delimiter="\t"):
            gold[row["query-id"]].append(row["corpus-id"])
    passages = {}
    for line in (DATA / "corpus.jsonl").read_text().splitlines():
        p = json.loads(line)
        passages[p["_id"]] = {"title": p["title"], "text": p["text"]}
    return Corpus(questions, dict(gold), passages)


def topic_pairs(corpus: Corpus) -> list[Pair]:
    """Disjoint pairs of different questions sharing a gold passage, in a fixed order."""
    pairs = sorted(
        (a, b)
        for a, b in itertools.combinations(sorted(corpus.gold), 2)
        if set(corpus.gold[a]) & set(corpus.gold[b])
    )
    used: set[str] = set()
    chosen = []
    for a, b in pairs:
        if a not in used and b not in used:
            used |= {a, b}
            shared = tuple(sorted(set(corpus.gold[a]) & set(corpus.gold[b])))
            chosen.append(Pair(a, b, shared))
    return chosen


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()


MIN_GOLD_CHARS = 20


class ScriptedResearcher:
    """The model's policy (see the module docstring), as a step of the scripted Messages API."""

    def __init__(self, corpus: Corpus) -> None:
        self._corpus = corpus
        # A passage holds the answer when it contains a gold passage's first sentence; one too
        # short to tell passages apart ("1." of a numbered list) is no evidence of anything.
        self._gold_by_question = {
            _key(text): [
                sentence
                for p in corpus.gold[q]
                if len(sentence := first_sentence(corpus.passages[p]["text"])) >= MIN_GOLD_CHARS
            ]
            for q, text in corpus.questions.items()
        }

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        question = next(m["content"] for m in body["messages"] if isinstance(m["content"], str))
        choice = body["tool_choice"]
        if choice.get("name") == SEARCH_TOOL:
            return message(tool_use(SEARCH_TOOL, query=question[:MAX_QUERY_CHARS]))
        found = self._sources(body)
        web = {n: t for n, (origin, t) in found.items() if origin == "web"}
        if web:  # after a web search (the loop may ask for keywords: this model never saves)
            return self._respond(web)
        gold = [_key(g) for g in self._gold_by_question[_key(question)]]
        holding = {n: t for n, (_, t) in found.items() if any(g in _key(t) for g in gold)}
        if holding:
            return self._respond(holding)
        if not any(b.get("name") == WEB_SEARCH_TOOL for b in self._uses(body)):
            return message(tool_use(WEB_SEARCH_TOOL, query=question[:MAX_QUERY_CHARS]))
        return message(
            tool_use(RESPOND_TOOL, answer="Not found.", citations=[], status="not_found")
        )

    @staticmethod
    def _uses(body: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            block
            for m in body["messages"]
            if m["role"] == "assistant" and isinstance(m["content"], list)
            for block in m["content"]
            if block.get("type") == "tool_use"
        ]

    @staticmethod
    def _sources(body: dict[str, Any]) -> dict[int, tuple[str, str]]:
        found = {}
        for m in body["messages"]:
            if m["role"] == "user" and isinstance(m["content"], list):
                for block in m["content"]:
                    for number, attrs, text in _SOURCE.findall(str(block.get("content", ""))):
                        origin = re.search(r'origin="([^"]+)"', attrs)
                        found[int(number)] = (origin.group(1) if origin else "docs", text)
        return found

    @staticmethod
    def _respond(cited: dict[int, str]) -> dict[str, Any]:
        return respond_quoting("Here is the answer", cited)


def web_pages(corpus: Corpus) -> dict[str, list[Page]]:
    """What the web says for each question (queried with its own words): its gold passages."""
    return {
        _key(text[:MAX_QUERY_CHARS]): [
            Page(p, corpus.passages[p]["title"], corpus.passages[p]["text"]) for p in corpus.gold[q]
        ]
        for q, text in corpus.questions.items()
    }


async def knowledge_base(settings: Settings) -> None:
    embedder = build_embedder(settings)
    backend = await open_backend(settings, embedder)
    try:
        await Ingestor(backend.index, embedder, settings.ingest).ingest(
            [str(REPO / "docs")], source="kb"
        )
    finally:
        await backend.close()


def _outcome(text: str, answer: Answer) -> dict[str, Any]:
    tools = [c.name for c in answer.trace.tool_calls]
    return {
        "question": text,
        "status": answer.status.value,
        "web_searches": tools.count(WEB_SEARCH_TOOL),
        "keywords_saved": bool(
            tools.count("save_keywords") and not any(c.is_error for c in answer.trace.tool_calls)
        ),
        "cites_learned": any(c.source_kind is SourceKind.LEARNED for c in answer.citations),
        "cites_web": any(c.source_kind is SourceKind.WEB for c in answer.citations),
        "seconds": answer.trace.total_seconds,
    }


async def replay(
    pairs: list[Pair], corpus: Corpus, data_dir: Path, keywords: bool
) -> dict[str, Any]:
    """One replay of `pairs` in a fresh knowledge base under `data_dir`."""
    env = {"BOT_EMBEDDINGS__CACHE_PATH": str(REPO / ".bot" / "embedding-cache.sqlite")}
    if not keywords:
        env["BOT_SEARCH__BM25_COLUMNS__KEYWORDS"] = "0"
    settings = bench_settings(data_dir, **env)
    await knowledge_base(settings)
    pages = web_pages(corpus)
    async with perplexity_server() as web:
        web.default = lambda body: completion(pages[_key(body["messages"][-1]["content"])])
        w = settings.web_search.model_copy(update={"enabled": True, "base_url": web.url})
        embedder = build_embedder(settings)
        backend = await open_backend(settings, embedder)
        index = backend.index
        knowledge = build_knowledge(settings, backend)
        api = FakeMessagesAPI([ScriptedResearcher(corpus)] * _MAX_STEPS)
        engine = AnswerEngine(
            index=index,
            store=SqliteConversationStore(settings.state_path, settings.search.busy_timeout_ms),
            settings=settings.answers,
            top_k=settings.search.top_k,
            model=ClaudeModel(api.client(), model="scripted", max_tokens=1024),
            knowledge=knowledge,
            web=WebLearning(
                PerplexitySearch(httpx.AsyncClient(), w, API_KEY),
                knowledge,
                w,
                settings.keywords.derived_max,
            ),
        )
        try:
            phases: dict[str, list[dict[str, Any]]] = {"topics": [], "related": []}
            for phase, attr in (("topics", "topic"), ("related", "related")):
                for n, pair in enumerate(pairs):
                    text = corpus.questions[getattr(pair, attr)]
                    asked = Question("bench", f"bench/{phase}/{n}", "u", text, ChannelKind.DIRECT)
                    phases[phase].append(_outcome(text, await engine.answer(asked)))
            api.check()
            learned_keywords = len(await knowledge.store.all())
        finally:
            await engine.close()
            await backend.close()
    topics, related = phases["topics"], phases["related"]
    learned = [r["cites_learned"] and not r["web_searches"] for r in related]
    from_learned = sum(learned)
    searched = [t for t in topics + related if t["web_searches"]]
    return {
        "topics": len(pairs),
        "topic_web_searches": sum(t["web_searches"] for t in topics),
        "topics_citing_web": sum(t["cites_web"] for t in topics),
        "related_from_learned": from_learned,
        "related_web_searches": sum(r["web_searches"] for r in related),
        "learned_rate": round(from_learned / len(pairs), 3),
        "keywords_saved_rate": round(
            sum(t["keywords_saved"] for t in searched) / max(1, len(searched)), 3
        ),
        "learned_keywords": learned_keywords,
        "related_missed": [r["question"] for r, ok in zip(related, learned, strict=True) if not ok],
        "seconds_per_question_p50": round(
            statistics.median(r["seconds"] for r in topics + related), 3
        ),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-keywords", action="store_true", help="keyword field weight 0")
    args = parser.parse_args()
    corpus = load_corpus()
    pairs = topic_pairs(corpus)[: args.topics]
    runs = []
    for n in range(args.runs):
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="bench-learning-") as tmp:
            runs.append(await replay(pairs, corpus, Path(tmp), keywords=not args.no_keywords))
        print(f"run {n + 1} ({time.perf_counter() - started:.1f}s): {runs[-1]}")
    result = {
        "topics": len(pairs),
        "keywords": "derived from titles" if not args.no_keywords else "ignored (weight 0)",
        "runs": runs,
        "learned_rate_median": statistics.median(r["learned_rate"] for r in runs),
        "keywords_saved_rate_median": statistics.median(r["keywords_saved_rate"] for r in runs),
        "seconds_per_question_p50_median": statistics.median(
            r["seconds_per_question_p50"] for r in runs
        ),
    }
    name = "learning-replay" + ("-no-keywords" if args.no_keywords else "") + ".json"
    path = write_result(name, result)
    print(
        f"related questions answered from learned knowledge: {result['learned_rate_median']:.0%} "
        f"(median of {args.runs} runs); keywords saved after "
        f"{result['keywords_saved_rate_median']:.0%} of web searches -> {path}"
    )


if __name__ == "__main__":
    asyncio.run(main())
