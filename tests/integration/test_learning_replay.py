"""The learning replay benchmark, in full (20 topics take seconds): the issue's bar, in CI."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.learning_replay import DATA, load_corpus, replay, topic_pairs

pytestmark = pytest.mark.skipif(not DATA.exists(), reason=f"{DATA} is not beside this checkout")


async def test_related_questions_are_answered_from_what_was_learned(tmp_path: Path) -> None:
    corpus = load_corpus()
    pairs = topic_pairs(corpus)[:20]
    assert len(pairs) == 20
    result = await replay(pairs, corpus, tmp_path, keywords=True)
    assert result["topic_web_searches"] == 20  # the knowledge base knew none of the topics
    assert result["keywords_saved_rate"] == 1.0  # every web search was learned
    assert result["learned_keywords"] > 0
    assert result["learned_rate"] >= 0.8, result["related_missed"]
    assert result["related_web_searches"] == 20 - result["related_from_learned"]
