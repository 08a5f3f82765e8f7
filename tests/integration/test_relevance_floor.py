"""The relevance floor's calibration, small: the same code as `python -m bench.relevance_floor`
on the Anthropic docs QA corpus and the bundled docs (SciFact's corpus takes ten minutes to embed;
its claims are still asked, off domain). The figures are deterministic (same model, same data),
so they are asserted directly: a change to the floor, the embedder or the search that starts
dropping questions the docs answer fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.relevance_floor import measure
from core.config import Settings
from tests.conftest import SHARED_EVAL

OFF_DOMAIN_DROPPED = 0.85  # SciFact claims against the Anthropic docs: 0.91 measured


@pytest.mark.slow
@pytest.mark.skipif(not SHARED_EVAL.exists(), reason=f"{SHARED_EVAL} is not beside this checkout")
async def test_the_default_floor_keeps_every_answerable_question(
    tmp_path: Path, settings: Settings, eval_embedding_cache: Path
) -> None:
    floor = settings.channels.default.min_relevance
    assert floor is not None
    result = await measure(tmp_path, (floor,), ("anthropic_docs_qa",), eval_embedding_cache)
    [row] = result["floors"]
    # Every question the corpus answers is kept: the floor sits below the lowest of them.
    assert row["in_domain_kept"] == {"anthropic_docs_qa → anthropic_docs_qa": 1.0}
    assert result["lowest_in_domain"] > floor
    assert row["bundled_docs_kept"]["grounded"] == 1.0
    # ... while most questions from another field never reach the model.
    assert row["off_domain_dropped"]["scifact → anthropic_docs_qa"] >= OFF_DOMAIN_DROPPED
    assert row["bundled_docs_kept"]["not covered"] < 1.0
