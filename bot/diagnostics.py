"""`bot doctor`: what an operator checks first when the bot misbehaves, in one table."""

from __future__ import annotations

from dataclasses import dataclass

from core.elasticsearch_connection import connect, licence, where
from core.elasticsearch_index import ElasticsearchIndex
from core.embedder import Embedder
from core.index import IndexError_
from core.sqlite_index import SqliteIndex


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str


async def diagnose(index: SqliteIndex | ElasticsearchIndex, embedder: Embedder) -> list[Check]:
    checks: list[Check] = []
    if isinstance(index, ElasticsearchIndex):
        checks.extend(await _cluster(index))
    try:
        stats = await index.stats()
    except IndexError_ as exc:
        return [*checks, Check("index", False, str(exc))]
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
    return checks


async def _cluster(index: ElasticsearchIndex) -> list[Check]:
    client = index.client
    info = await connect(client, index.settings)
    checks = [Check("connection", True, f"{where(index.settings)}, cluster {info.name}")]
    checks.append(Check("version", True, f"Elasticsearch {info.version} (client major matches)"))
    health = (await client.cluster.health()).body
    status = str(health.get("status"))
    checks.append(
        Check(
            "health",
            status in ("green", "yellow"),
            f"{status}, {health.get('number_of_nodes')} node(s)",
        )
    )
    kind, licence_status = await licence(client)
    fusion = index.settings.fusion
    checks.append(Check("licence", True, f"{kind} ({licence_status}); fusion: {fusion}"))
    current = await index.current_index()
    try:
        await index.check_compatible()
        checks.append(Check("index", True, f"{index.names.chunks} -> {current}"))
    except IndexError_ as exc:
        checks.append(Check("index", False, str(exc)))
    return checks
