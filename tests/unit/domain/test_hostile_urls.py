"""URLs carrying credentials: `redact_url` and `redact_urls_in` strip `user:pass@` from
well-formed and malformed URLs alike, never raise, and stay linear on hostile text."""

from __future__ import annotations

import time

import pytest

from core.domain.urls import redact_url, redact_urls_in


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://elastic:hunter2@es.example.com:9200", "http://es.example.com:9200"),
        ("https://user:pass@wiki.example.com/a/b?x=1#h", "https://wiki.example.com/a/b?x=1#h"),
        ("http://elastic:hunter2@[bad", "http://[bad"),
        ("http://elastic:hunter2@host:notaport", "http://host:notaport"),
        ("http://elastic:p@ss:w@rd@host:9200/", "http://host:9200/"),  # last "@" ends userinfo
        ("http://token@host", "http://host"),
        ("http://:hunter2@host", "http://host"),
        ("elastic:hunter2@host:9200", "host:9200"),  # no scheme
        ("//elastic:hunter2@host", "//host"),
        ("://@", "://"),
        ("http://u:p@host\\path@x", "http://host\\path@x"),  # urllib3 ends the authority at "\"
    ],
)
def test_userinfo_is_removed_and_the_rest_kept(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert "hunter2" not in redact_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://medium.com/@someone/a-post",  # "@" in the path is not userinfo
        "https://docs.example.com/page?by=a@b.c",
        "https://docs.example.com/#@top",
        "http://[::1]:9200",
        "",
        "not a url",
        "http://",
    ],
)
def test_urls_without_userinfo_are_unchanged(url: str) -> None:
    assert redact_url(url) == url


def test_every_url_in_a_message_is_redacted_and_nothing_else() -> None:
    message = (
        "Could not parse URL 'http://elastic:hunter2@[bad'; tried https://a:b@c.example/x "
        "and mail me at ops@example.com"
    )
    assert redact_urls_in(message) == (
        "Could not parse URL 'http://[bad'; tried https://c.example/x "
        "and mail me at ops@example.com"
    )


def test_hostile_text_is_redacted_in_linear_time() -> None:
    """Long runs without a delimiter, many schemes, many "@": no quadratic backtracking."""
    cases = ["a" * 200_000, "a://" * 50_000, "http://" + "x" * 200_000, "://@" * 50_000]
    started = time.process_time()
    for text in cases:
        redact_urls_in(text)
        redact_url(text)
    assert time.process_time() - started < 1.0
