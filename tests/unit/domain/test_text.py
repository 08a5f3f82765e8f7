"""One word-boundary clip for every caller (snippets, quotes, web titles, derived keywords)."""

from __future__ import annotations

import pytest

from core.domain.text import clip


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("short enough", 20, "short enough"),
        ("exactly ten", 11, "exactly ten"),
        ("one two three four", 12, "one two…"),
        ("  spread\n over\tlines  ", 30, "spread over lines"),
        ("unbreakable" * 3, 10, "unbreakab…"),
    ],
)
def test_clip_cuts_at_a_word_boundary_within_the_limit(text: str, limit: int, expected: str):
    clipped = clip(text, limit)
    assert clipped == expected
    assert len(clipped) <= limit


def test_clip_without_an_ellipsis_keeps_the_whole_limit_for_words():
    # Derived keywords are cut this way: no ellipsis, the last whole word kept.
    assert clip("claude prompt caching explained", 20, ellipsis="") == "claude prompt"
    assert clip("claude prompt caching", 21, ellipsis="") == "claude prompt caching"
