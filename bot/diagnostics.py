"""`bot doctor`: what an operator checks first when the bot misbehaves, in one table.

Two kinds of rows: checks of the backend (reachable, versions, licence, index, content), which
fail when something is wrong, and what the settings and the environment make of the bot (which
model answers and why, which platform tokens are set, whether the web is searched). Those are
informational, and fail only where the settings contradict themselves: a forced model with no
way to reach it, web search on with no key (every answering process refuses to start then).
Secrets are named, never shown; URLs are shown without credentials.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.unset_secrets import env_file_hint
from core.config import Secrets, Settings
from core.config_loader import SECRET_ENV_VARS
from core.domain.urls import redact_url
from core.errors import SearchIndexError

if TYPE_CHECKING:
    from core.ports import Backend, SearchIndex

# What each way of running a platform needs from the environment.
PLATFORM_MODES: dict[str, tuple[str, ...]] = {
    "bot slack --http": ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET"),
    "bot slack --socket": ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"),
    "bot discord": ("DISCORD_TOKEN",),
}
PLATFORM_TOKENS = ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "DISCORD_TOKEN")


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str
    info: bool = False  # says what the settings make of the bot; not a health check


async def diagnose(backend: Backend, settings: Settings, channel: str | None) -> list[Check]:
    """The backend's checks, the index's content, and the channel policies' sources against
    it (with `channel`'s whole policy, when asked for)."""
    from core.backends.sqlite.index import SqliteIndex

    checks = [Check(c.name, c.ok, c.detail) for c in await backend.health()]
    index, embedder = backend.index, backend.embedder
    try:
        stats = await index.stats()
    except SearchIndexError as exc:
        if not any(c.detail == str(exc) for c in checks):  # a damaged file, found already
            checks.append(Check("index", False, str(exc)))
        if channel is not None:
            checks.append(channel_policy(settings, channel, None))
        return checks
    sources = ", ".join(f"{k}: {v}" for k, v in sorted(stats.sources.items())) or "none"
    checks.append(
        Check(
            "content",
            stats.chunks > 0,
            f"{stats.documents} documents, {stats.chunks} chunks ({stats.learned_chunks} "
            f"learned); sources {sources}"
            + ("" if stats.chunks else "; nothing ingested yet: bot ingest PATH"),
        )
    )
    checks.append(Check("embedder", True, f"{embedder.model_id}, {embedder.dimensions} dimensions"))
    if isinstance(index, SqliteIndex):
        checks.append(Check("vectors", True, index.vector_plan(stats.chunks), info=True))
    checks += policy_sources(settings, stats.sources)
    checks += removed_sources(settings, stats.sources)
    if channel is not None:
        checks.append(channel_policy(settings, channel, stats.sources))
    return checks


def removed_sources(settings: Settings, indexed: Mapping[str, int]) -> list[Check]:
    """Sources taken out of config.yaml whose documents are still indexed: they are still
    cited, and no sync will ever prune them (a sync prunes only its own source's)."""
    from core.ingest.sync import unconfigured

    gone = [n for n in unconfigured(settings.storage.data_dir, settings.sources) if indexed.get(n)]
    if not gone:
        return []
    named = ", ".join(f"{n} ({indexed[n]} chunks)" for n in gone)
    return [
        Check(
            "removed sources",
            False,
            f"{named}: not in config.yaml any more, still indexed and cited; "
            f"`bot remove {' '.join(gone)}`, or put them back under `sources:`",
        )
    ]


async def readiness(index: SearchIndex) -> str | None:
    """Why questions asked now can't be answered from the knowledge base (None: they can), for
    a platform's readiness probe: the index can't be read, or holds nothing. Short, naming no
    path or value (the probe's port may be public); `bot doctor` says more."""
    try:
        stats = await index.stats()
    except Exception as exc:  # noqa: BLE001 (whatever it is, the bot can't answer)
        return f"the index can't be read ({type(exc).__name__}): run bot doctor"
    if not stats.chunks:
        return "the knowledge base is empty: nothing has been ingested"
    return None


class ReadinessProbe:
    """`readiness` at most once per `ttl_s`, concurrent probes sharing one look: the probe's
    port is public, and reading the index's figures scans every chunk (SQLite) or aggregates
    them (Elasticsearch), on the threads answers need."""

    def __init__(self, index: SearchIndex, ttl_s: float) -> None:
        self._index = index
        self._ttl_s = ttl_s
        self._lock = asyncio.Lock()
        self._looked_at: float | None = None
        self._reason: str | None = None

    def _fresh(self) -> bool:
        looked = self._looked_at
        return looked is not None and time.monotonic() - looked < self._ttl_s

    async def __call__(self) -> str | None:
        if not self._fresh():
            async with self._lock:
                if not self._fresh():  # another probe may have looked while this one waited
                    self._reason = await readiness(self._index)
                    self._looked_at = time.monotonic()
        return self._reason


async def model_tools(settings: Settings, backend: Backend) -> list[Check]:
    """What was learned about the OpenAI-compatible server's tool calls, when it answers."""
    from core.answer.openai_compat import tool_support_key

    o = settings.openai
    if settings.answers.provider not in ("auto", "openai") or not (o.base_url and o.model):
        return []
    if settings.answers.provider == "auto" and _is_set(settings.secrets, "ANTHROPIC_API_KEY"):
        return []
    if o.tool_support != "auto":
        known: str | None = f"{o.tool_support} (openai.tool_support)"
    else:
        known = await backend.facts.get(tool_support_key(o), o.tool_support_ttl_s)
    detail = {
        None: 'not known yet: found out on the first question (named tool_choice, then "required")',
        "none": "none: answers by search-then-answer (learned from the server)",
    }.get(known, f"{known}: answers with tool use")
    return [Check("model tools", True, detail, info=True)]


def channel_policy(settings: Settings, key: str, indexed: Collection[str] | None) -> Check:
    """How the bot behaves in one channel, and which `channels.policies` entries said so;
    failed when it names a source of which `indexed` (the index's, when it could be read)
    holds nothing: a typo or a source never synced, whose documents questions there miss."""
    p = settings.policy(key)
    came_from = ", ".join(p.matched) or "channels.default only"
    sources = ", ".join(p.sources) or "all"
    detector = "rules + classifier" if settings.channels.question_classifier else "rules only"
    escalation = ", ".join(p.escalate_to) or "nobody"
    detail = (
        f"trigger {p.trigger}; questions_only {str(p.questions_only).lower()} ({detector}); "
        f"answer_only_when_grounded {str(p.answer_only_when_grounded).lower()}; "
        f"min_relevance {p.min_relevance:g}; "
        f"sources {sources}; web_search {'on' if p.web_search else 'off'}; "
        f"private {str(p.private).lower()}; reactions {str(p.reactions).lower()}; "
        f"followups {p.followups}; "
        f"escalate_to {escalation} (from {came_from})"
    )
    if indexed is not None and (missing := not_indexed(settings, p.sources, indexed)):
        return Check(f"channel {key}", False, f"{detail}; {missing}")
    return Check(f"channel {key}", True, detail, info=True)


def policy_sources(settings: Settings, indexed: Collection[str]) -> list[Check]:
    """Every source a channel policy limits its channels to, looked for in the index: a name
    with no document (a typo, a source never synced) leaves those channels answering nothing,
    so it fails, like the other settings that contradict themselves. No row when no policy
    names a source."""
    c = settings.channels
    named = {"channels.default": c.default.sources or []} | {
        f"channels.policies.{prefix}": policy.sources or []
        for prefix, policy in sorted(c.policies.items())
    }
    named = {where: sources for where, sources in named.items() if sources}
    if not named:
        return []
    problems = [
        f"{where}: {missing}"
        for where, sources in named.items()
        if (missing := not_indexed(settings, sources, indexed))
    ]
    if problems:
        return [Check("channel sources", False, "; ".join(problems))]
    listed = ", ".join(sorted({s for sources in named.values() for s in sources}))
    return [Check("channel sources", True, f"every source a policy names is indexed: {listed}")]


def not_indexed(settings: Settings, sources: Iterable[str], indexed: Collection[str]) -> str:
    """What is wrong with the sources the index holds nothing of, and what to do; empty when
    there are none."""
    missing = [s for s in dict.fromkeys(sources) if s not in indexed]
    if not missing:
        return ""
    said = [
        f"source {s} has no document in the index: run `bot sync {s}`"
        if s in settings.sources
        else f"source {s} has no document in the index and no entry in `sources:` (a typo? "
        f"else `bot ingest PATH --source {s}`)"
        for s in missing
    ]
    return "; ".join(said) + f" (indexed: {', '.join(sorted(indexed)) or 'nothing'})"


def configuration(settings: Settings) -> list[Check]:
    """The rows that need no connection: where the data is, the model, platforms, web search."""
    return [
        _data(settings),
        _model(settings),
        _platforms(settings.secrets),
        _web_search(settings),
    ]


def _is_set(secrets: Secrets, env_name: str) -> bool:
    return getattr(secrets, SECRET_ENV_VARS[env_name]) is not None


def _data(settings: Settings) -> Check:
    where = settings.storage.data_dir.resolve()
    if settings.search.backend == "sqlite":
        held = f"index {settings.index_path.resolve()}, conversations, embedding cache"
    else:
        held = "the embedding cache; the index and the shared state are in the cluster"
    return Check("data", True, f"{where} ({held})", info=True)


def _model(settings: Settings) -> Check:
    """Which model answers, by the same rule as `bot.wiring` (Claude with its key, else an
    OpenAI-compatible server, else extractive), and why."""
    forced = settings.answers.provider
    has_key = _is_set(settings.secrets, "ANTHROPIC_API_KEY")
    o = settings.openai
    openai_ready = bool(o.base_url and o.model)
    why_forced = f"answers.provider is {forced}"
    if forced in ("auto", "anthropic") and has_key:
        at = f" at {redact_url(settings.anthropic.base_url)}" if settings.anthropic.base_url else ""
        reason = why_forced if forced == "anthropic" else "ANTHROPIC_API_KEY is set"
        return Check("model", True, f"Claude {settings.anthropic.model}{at} ({reason})", info=True)
    if forced == "anthropic":
        return Check(
            "model",
            False,
            f"{why_forced} but ANTHROPIC_API_KEY is not set: answers would be extractive",
        )
    if forced in ("auto", "openai") and openai_ready:
        key = "with" if _is_set(settings.secrets, "OPENAI_API_KEY") else "without"
        reason = why_forced if forced == "openai" else "ANTHROPIC_API_KEY is not set"
        return Check(
            "model",
            True,
            f"{o.model} at {redact_url(o.base_url or '')} (OpenAI-compatible, {key} "
            f"OPENAI_API_KEY; {reason})",
            info=True,
        )
    if forced == "openai":
        return Check(
            "model",
            False,
            f"{why_forced} but openai.base_url and openai.model are not both set: answers "
            "would be extractive",
        )
    reason = (
        why_forced
        if forced == "extractive"
        else "neither ANTHROPIC_API_KEY nor openai.base_url + openai.model is set"
        + env_file_hint("ANTHROPIC_API_KEY")
    )
    return Check(
        "model", True, f"none: extractive answers, the best passages quoted ({reason})", info=True
    )


def _platforms(secrets: Secrets) -> Check:
    """Which tokens are set (names only) and which platform commands can start with them."""
    present = [name for name in PLATFORM_TOKENS if _is_set(secrets, name)]
    missing = [name for name in PLATFORM_TOKENS if name not in present]
    ready = [mode for mode, needs in PLATFORM_MODES.items() if set(needs) <= set(present)]
    detail = f"set: {', '.join(present) or 'none'}; not set: {', '.join(missing) or 'none'}"
    can = f"can start: {', '.join(ready)}" if ready else "no platform command can start"
    return Check("platform tokens", True, f"{detail}; {can}", info=True)


def _web_search(settings: Settings) -> Check:
    w = settings.web_search
    reach = settings.web_search_reach()
    if reach.everywhere:
        state = "on everywhere" + (f" except {', '.join(reach.off)}" if reach.off else "")
    elif reach.on:
        within = [p for p in reach.off if any(p.startswith(f"{on}/") for on in reach.on)]
        state = f"on in {', '.join(reach.on)} only" + (
            f" (not in {', '.join(within)})" if within else ""
        )
    else:
        state = "off"
    has_key = _is_set(settings.secrets, "PERPLEXITY_API_KEY")
    if state == "off":
        unused = "; PERPLEXITY_API_KEY is set but unused" if has_key else ""
        detail = f"off (web_search.enabled, web_search.channels, channel policies){unused}"
        return Check("web search", True, detail, info=True)
    if not has_key:
        return Check(
            "web search",
            False,
            f"{state}, but PERPLEXITY_API_KEY is not set: every command that answers "
            "(bot ask, chat, slack, discord) stops at start",
        )
    detail = f"{state}; {w.model} at {redact_url(w.base_url)}; PERPLEXITY_API_KEY set"
    return Check("web search", True, detail, info=True)
