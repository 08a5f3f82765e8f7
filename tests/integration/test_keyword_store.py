"""Learned keywords on every backend: one keyword however many questions produced it, every
association kept, uses counted, even when 50 answers save the same keyword at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import time_machine

from bot.wiring import open_backend
from core.config import Settings
from core.ports import KeywordStore
from core.search.embedder import CachedEmbedder


@pytest.fixture
async def stores(
    backend_settings: Settings, embedder: CachedEmbedder
) -> AsyncIterator[tuple[KeywordStore, KeywordStore]]:
    """Two processes' stores over the same backend."""
    backends = [await open_backend(backend_settings, embedder) for _ in range(2)]
    try:
        yield backends[0].keywords, backends[1].keywords
        await backends[0].drop()
    finally:
        for backend in backends:
            await backend.close()


async def test_fifty_concurrent_saves_make_one_keyword_with_fifty_associations(
    stores: tuple[KeywordStore, KeywordStore],
) -> None:
    a, b = stores
    await asyncio.gather(
        *(
            (a if i % 2 else b).add("e1234", doc_id=f"web:{i % 5}", question=f"question {i}?")
            for i in range(50)
        )
    )
    learned = await a.all()
    assert [k.keyword for k in learned] == ["e1234"]
    assert learned[0].associations == 50
    assert learned[0].uses == 0
    assert learned[0].last_used_at is None


async def test_repeated_saves_are_one_association(
    stores: tuple[KeywordStore, KeywordStore],
) -> None:
    a, b = stores
    for store in (a, b, a):
        await store.add("webhook signature", doc_id="web:1", question="why 401?")
    await b.add("webhook signature", doc_id="web:2", question="why 401?")
    found = await a.get("webhook signature")
    assert found is not None
    assert found.associations == 2
    assert await a.get("never saved") is None


async def test_uses_are_counted_across_processes(
    stores: tuple[KeywordStore, KeywordStore],
) -> None:
    a, b = stores
    with time_machine.travel(1_800_000_000, tick=False):
        await a.add("rate limits", doc_id="web:9", question="how many requests?")
        await asyncio.gather(*(s.record_use(["rate limits", "gone"]) for s in (a, b) * 5))
    found = await b.get("rate limits")
    assert found is not None
    assert found.uses == 10
    assert found.last_used_at == pytest.approx(1_800_000_000)
    assert found.created_at == pytest.approx(1_800_000_000)
