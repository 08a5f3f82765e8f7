"""Prometheus metrics of one bot process, on a registry of its own (not the library's global
one, which would mix in whatever else the process imports).

The engine counts every answer it gives (`core.answer.engine`); the adapters count what they
acknowledge and what fails. The names below are the ones a dashboard uses (the README lists
them); the Slack HTTP server serves them at `metrics.path`, `bot discord` and `bot clock` on
`metrics.port`.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

# Seconds: an answer takes from a few milliseconds (quoted passages) to a minute (a slow model).
ANSWER_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120)

REGISTRY = CollectorRegistry(auto_describe=True)

ANSWERS = Counter(
    "docbot_answers",
    "Answers the engine gave, by platform, outcome and how they were written.",
    ["platform", "status", "mode"],
    registry=REGISTRY,
)
ANSWER_SECONDS = Histogram(
    "docbot_answer_seconds",
    "Time to answer one question, end to end in the engine.",
    ["platform"],
    buckets=ANSWER_BUCKETS,
    registry=REGISTRY,
)
MODEL_SECONDS = Histogram(
    "docbot_model_seconds",
    "Time spent waiting for the model, per answer that used one.",
    ["platform"],
    buckets=ANSWER_BUCKETS,
    registry=REGISTRY,
)
TOOL_CALLS = Counter(
    "docbot_tool_calls", "Tool calls the model made, by tool.", ["tool"], registry=REGISTRY
)
WEB_SEARCHES = Counter(
    "docbot_web_searches", "Web searches made while answering.", registry=REGISTRY
)
WEB_ANSWERS = Counter(
    "docbot_web_answers", "Answers citing the web.", ["platform"], registry=REGISTRY
)
TOKENS = Counter(
    "docbot_tokens", "Model tokens, by direction (input, output).", ["direction"], registry=REGISTRY
)
HELD_BACK = Counter(
    "docbot_answers_held_back",
    "Answers not posted: an auto channel's answer without verified citations.",
    ["platform"],
    registry=REGISTRY,
)
LIMITED = Counter(
    "docbot_answers_limited",
    "Questions bounded by answers.limits: an asker over per_asker (asker), or no model slot "
    "free within model_wait_s (model: answered from the passages).",
    ["platform", "limit"],
    registry=REGISTRY,
)
EVENT_ACKS = Counter(
    "docbot_event_acks",
    "Platform requests acknowledged, by kind and HTTP status (Discord: interactions deferred).",
    ["platform", "kind", "code"],
    registry=REGISTRY,
)
ERRORS = Counter(
    "docbot_errors",
    "Failures while handling an event, by platform and where they happened.",
    ["platform", "stage"],
    registry=REGISTRY,
)
