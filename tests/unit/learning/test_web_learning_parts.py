"""Unit tests of the pure pieces of web search and learning: parsing a Perplexity response,
per-channel web search settings, web query and keyword validation, keywords derived from page
titles, learned sources, keyword pruning rules and votes per learned document."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from core.answer.tools import (
    RESPOND_TOOL,
    SAVE_KEYWORDS_TOOL,
    SEARCH_TOOL,
    WEB_SEARCH_TOOL,
    SaveKeywordsInput,
    WebSearchInput,
    parse_tool_input,
    tool_definitions,
)
from core.config import KeywordSettings, WebSearchSettings
from core.domain.feedback import votes_by_learned_document
from core.domain.learned import LEARNED_PREFIX, LearnedDocument, LearnedKeyword
from core.domain.web import WEB_SOURCE, WebResult, WebSource, web_chunks
from core.errors import ToolInputError, WebSearchError
from core.learning.knowledge import derive_keywords, learned_doc_id, learned_sources
from core.learning.perplexity import parse_response, web_search_allowed
from core.learning.pruning import StaleReason, stale_keywords

A = "https://stripe.example/docs/webhooks"
B = "https://blog.example/retries"
C = "https://docs.example.com/cli/"
DAY = 86_400.0
NOW = 1_000 * DAY


def _response(content: Any, citations: Any = None, search_results: Any = None) -> dict[str, Any]:
    data: dict[str, Any] = {"choices": [{"message": {"role": "assistant", "content": content}}]}
    if citations is not None:
        data["citations"] = citations
    if search_results is not None:
        data["search_results"] = search_results
    return data


def _parse(data: Any, *, max_sources: int = 8, max_source_chars: int = 2_000) -> WebResult:
    return parse_response(
        "stripe webhooks", data, max_sources=max_sources, max_source_chars=max_source_chars
    )


def _texts(result: WebResult) -> dict[str, str]:
    return {s.url: s.text for s in result.sources}


# --- parse_response -----------------------------------------------------------------------


def test_a_marker_of_thousands_of_digits_cites_nothing_and_breaks_nothing() -> None:
    huge = "[" + "9" * 5000 + "]"
    result = _parse(_response(f"Webhooks are signed.[1] Retries back off.{huge}", citations=[A]))
    assert _texts(result) == {A: "Webhooks are signed."}


@pytest.mark.parametrize(
    "url",
    [
        "https://user:pw@evil.example/",  # its title would show the credentials
        "https://docs.example.com@evil.example/",  # goes to evil.example
        "https://evil.example/\u200bpath",  # zero-width
        "https://evil.example/\u202epath",  # right-to-left override
        "javascript:alert(1)",
        "file:///etc/passwd",
        "https://[::1",  # no parser accepts it: that page alone is dropped, not the result
    ],
)
def test_a_cited_page_that_could_not_be_linked_is_not_learned(url: str) -> None:
    result = _parse(_response("Webhooks are signed.[1] Retries back off.[2]", citations=[url, A]))
    assert [s.url for s in result.sources] == [A]


def test_sentences_are_attributed_to_the_pages_they_cite() -> None:
    content = (
        "Webhooks are signed.[1][2] Retries back off exponentially.[2]\n"
        "The CLI forwards events[3]. An unsourced remark."
    )
    result = _parse(
        _response(
            content,
            citations=[A, B, C],
            search_results=[
                {"title": "Webhook signatures", "url": A, "snippet": "snippet A"},
                {"title": "  Retries  ", "url": B, "snippet": "snippet B"},
            ],
        )
    )
    assert result.query == "stripe webhooks"
    assert [s.url for s in result.sources] == [A, B, C]
    assert _texts(result) == {
        A: "Webhooks are signed.",
        B: "Webhooks are signed. Retries back off exponentially.",
        C: "The CLI forwards events.",
    }
    titles = {s.url: s.title for s in result.sources}
    assert titles == {A: "Webhook signatures", B: "Retries", C: "docs.example.com/cli"}
    assert all("[" not in s.text for s in result.sources)


def test_a_page_cited_twice_in_one_sentence_gets_the_sentence_once() -> None:
    result = _parse(_response("Signed with HMAC.[1][1] Uses SHA-256.[1]", citations=[A]))
    assert _texts(result) == {A: "Signed with HMAC. Uses SHA-256."}


def test_a_cited_page_without_a_citing_sentence_falls_back_to_its_snippet() -> None:
    result = _parse(
        _response(
            "Only the first page is quoted.[1]",
            citations=[A, B, C],
            search_results=[
                {"title": "A", "url": A, "snippet": "snippet of A"},
                {"title": "B", "url": B, "snippet": "  snippet   of B  "},
                {"title": "C has neither sentence nor snippet", "url": C},
            ],
        )
    )
    assert _texts(result) == {A: "Only the first page is quoted.", B: "snippet of B"}


def test_pages_only_in_search_results_are_used_with_their_snippets() -> None:
    result = _parse(
        _response(
            "A summary without markers.",
            search_results=[
                {"title": "Webhook signatures", "url": A, "snippet": "Verify the signature."},
                {"title": "Retries", "url": B, "snippet": "Retries back off."},
                {"title": "Nothing to quote", "url": C, "snippet": "   "},
                {"title": "Bad scheme", "url": "javascript:alert(1)", "snippet": "x"},
                "not a dict",
            ],
        )
    )
    assert {(s.url, s.title, s.text) for s in result.sources} == {
        (A, "Webhook signatures", "Verify the signature."),
        (B, "Retries", "Retries back off."),
    }


def test_markers_index_search_results_in_order_when_there_are_no_citations() -> None:
    # Without `citations`, [n] can only mean the n-th search result; eight pages make a
    # right answer by chance (1 in 40320) practically impossible.
    urls = [f"https://p{i}.example/page" for i in range(8)]
    content = " ".join(f"Fact {i} is true.[{i + 1}]" for i in range(8))
    result = _parse(
        _response(
            content,
            search_results=[
                {"title": f"Page {i}", "url": u, "snippet": f"snippet {i}"}
                for i, u in enumerate(urls)
            ],
        )
    )
    assert _texts(result) == {u: f"Fact {i} is true." for i, u in enumerate(urls)}
    assert [s.url for s in result.sources] == urls


def test_non_web_and_malformed_citation_urls_are_dropped_without_shifting_numbers() -> None:
    citations = [
        "javascript:alert(1)",
        "ftp://x",
        42,
        "https://",
        "http://exa mple.com/x",
        None,
        A,
    ]
    content = " ".join(f"Claim {n}.[{n}]" for n in range(1, 8))
    result = _parse(_response(content, citations=citations))
    assert _texts(result) == {A: "Claim 7."}


def test_markers_out_of_range_are_ignored() -> None:
    result = _parse(_response("Zero.[0] Too far.[9] Fine.[1] Also far.[2]", citations=[A]))
    assert _texts(result) == {A: "Fine."}


def test_max_sources_is_honoured_in_citation_order() -> None:
    urls = [f"https://p{i}.example/" for i in range(5)]
    content = " ".join(f"Fact {i}.[{i + 1}]" for i in range(5))
    result = _parse(_response(content, citations=urls), max_sources=2)
    assert [s.url for s in result.sources] == urls[:2]


def test_max_source_chars_is_honoured() -> None:
    sentence = " ".join(f"word{i}" for i in range(200)) + ".[1]"
    result = _parse(_response(sentence, citations=[A]), max_source_chars=100)
    (source,) = result.sources
    assert len(source.text) <= 100
    assert source.text.endswith("…")
    assert source.text.startswith("word0 word1 word2")


@pytest.mark.parametrize(
    "data",
    [
        None,
        [],
        {},
        {"choices": []},
        {"choices": None},
        {"choices": [{}]},
        {"choices": [{"message": {}}]},
        _response(None),
        _response(42),
        _response(["a list"]),
    ],
)
def test_malformed_responses_raise(data: Any) -> None:
    with pytest.raises(WebSearchError, match="malformed"):
        _parse(data)


def test_a_response_with_no_usable_page_has_no_sources() -> None:
    result = _parse(_response("Text.[1]", citations=["ftp://x"]))
    assert result.sources == ()


# --- web_search_allowed and its settings ---------------------------------------------------


@pytest.mark.parametrize(
    ("key", "allowed"),
    [
        ("slack/T1/C1/123.4", True),
        ("slack/T1/C1", True),
        ("slack/T1/C12/1", False),
        ("slack/T1/C2/1", False),
        ("slack/T2/C1/1", False),
        ("discord/1/2", False),
    ],
)
def test_channel_override_enables_one_channel(key: str, allowed: bool) -> None:
    settings = WebSearchSettings(enabled=False, channels={"slack/T1/C1": True})
    assert web_search_allowed(settings, key) is allowed


@pytest.mark.parametrize(
    ("key", "allowed"),
    [
        ("slack/T1/C1/1", False),
        ("slack/T1", False),
        ("slack/T1/C9/1", True),
        ("slack/T1/C99/1", False),
        ("slack/T10/C1/1", True),
        ("discord/1/2", True),
    ],
)
def test_most_specific_channel_override_wins(key: str, allowed: bool) -> None:
    settings = WebSearchSettings(enabled=True, channels={"slack/T1": False, "slack/T1/C9": True})
    assert web_search_allowed(settings, key) is allowed


def test_override_order_does_not_matter() -> None:
    settings = WebSearchSettings(enabled=True, channels={"slack/T1/C9": True, "slack/T1": False})
    assert web_search_allowed(settings, "slack/T1/C9/1") is True
    assert web_search_allowed(settings, "slack/T1/C8/1") is False


def test_global_setting_applies_without_overrides() -> None:
    assert web_search_allowed(WebSearchSettings(enabled=True), "slack/T1/C1/1") is True
    assert web_search_allowed(WebSearchSettings(enabled=False), "slack/T1/C1/1") is False


@pytest.mark.parametrize("prefix", ["Slack /x", "slack//c", "slack/", "/slack", "slack/T1 /C1", ""])
def test_invalid_channel_prefixes_are_refused(prefix: str) -> None:
    with pytest.raises(ValidationError, match="conversation-key prefix"):
        WebSearchSettings(enabled=True, channels={prefix: True})


# --- web_chunks -------------------------------------------------------------------------------


def test_web_chunks_are_unlearned_web_passages_linked_to_their_pages() -> None:
    result = WebResult(
        "q", (WebSource(A, "Webhooks", "Signed."), WebSource(B, "Retries", "Back off."))
    )
    chunks = web_chunks(result)
    assert [c.url for c in chunks] == [A, B]
    assert [c.doc_id for c in chunks] == [A, B]
    assert [(c.title, c.text) for c in chunks] == [
        ("Webhooks", "Signed."),
        ("Retries", "Back off."),
    ]
    assert all(c.source == WEB_SOURCE == "web" for c in chunks)
    assert all(c.learned is False for c in chunks)
    assert [c.position for c in chunks] == [0, 1]
    assert len({c.chunk_id for c in chunks}) == 2


def test_web_chunk_ids_differ_for_different_text_of_one_page() -> None:
    first = web_chunks(WebResult("q", (WebSource(A, "T", "one"),)))[0]
    second = web_chunks(WebResult("q", (WebSource(A, "T", "two"),)))[0]
    again = web_chunks(WebResult("q", (WebSource(A, "T", "one"),)))[0]
    assert first.chunk_id != second.chunk_id
    assert first.chunk_id == again.chunk_id


# --- web_search and save_keywords tool inputs ----------------------------------------------


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ("see http://example.com/x for details", "must not contain URLs"),
        ("HTTPS://stripe.example/docs webhooks", "must not contain URLs"),
        ("www.example.com setup guide", "must not contain URLs"),
        ("contact jane.doe@example.com about refunds", "e-mail addresses"),
        ("why is sk-ant-api03-AbCdEfGh12345678 rejected", "secret, token or key"),
        ("xoxb-123456789012-abcdefghijkl invalid_auth", "secret, token or key"),
        ("ghp_" + "a1B2" * 9 + " push denied", "secret, token or key"),
        ("AKIAIOSFODNN7EXAMPLE access denied", "secret, token or key"),
        ("config api_key=abc not working", "secret, token or key"),
        ("header Bearer abcdefghijklmnop123 rejected", "secret, token or key"),
        ("decode eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abc", "secret, token or key"),
        ("commit 3f786850e387550fdab836ed7e6dc881de23001b broke", "secret, token or key"),
        ("token Zx9Qw8Er7Ty6Ui5Op4As3Df2Gh1JkLzXcVbNm0Qa", "secret, token or key"),
        ("bad\x07query", "control characters"),
        ("escape \x1b[31m red", "control characters"),
        ("x", "at least 2"),
        ("q" * 301, "at most 300"),
    ],
)
def test_leaky_or_invalid_web_queries_are_refused(query: str, problem: str) -> None:
    with pytest.raises(ToolInputError, match="query") as caught:
        parse_tool_input(WebSearchInput, {"query": query})
    assert problem in str(caught.value)
    assert "Value error," not in str(caught.value)


@pytest.mark.parametrize(
    "query",
    [
        "stripe webhook signature 401",
        "python 3.12 release date",
        "E1234 error code",
        "pneumonoultramicroscopicsilicovolcanoconiosis definition",
        "q" * 300,
    ],
)
def test_normal_web_queries_are_accepted(query: str) -> None:
    assert parse_tool_input(WebSearchInput, {"query": query}).query == query


@pytest.mark.parametrize(
    "query",
    [
        # "basic"/"bearer" followed by any 12+ character word, and AKIA/ASIA/AIza matched
        # case-insensitively, make ordinary technical terms look like credentials.
        "http basic authentication nginx",
        "gcp asia-southeast1 region latency",
        "react@18.2.0 release notes",
        "jwt token: invalid signature",
    ],
)
def test_technical_terms_resembling_credential_shapes_are_accepted(query: str) -> None:
    assert parse_tool_input(WebSearchInput, {"query": query}).query == query


def test_web_query_is_trimmed() -> None:
    assert parse_tool_input(WebSearchInput, {"query": "  rate limits  "}).query == "rate limits"


@pytest.mark.parametrize(
    ("keywords", "problem"),
    [
        (["a"], "1 characters; use 2 to 50"),
        (["k" * 51], "51 characters; use 2 to 50"),
        ([""], "can't be empty"),
        (["   "], "can't be empty"),
        (["bad\x07"], "control characters"),
        (["<!channel> deploys"], "contains a mention"),
        (["<@U0123ABC>"], "contains a mention"),
        (["@everyone webhooks"], "contains a mention"),
        (["stripe", "x"], "'x' has 1 characters"),
        ([], "at least 1 item"),
        ([f"keyword {i}" for i in range(11)], "at most 10 items"),
    ],
)
def test_invalid_keywords_are_refused_with_the_reason(keywords: list[str], problem: str) -> None:
    with pytest.raises(ToolInputError, match="keywords") as caught:
        parse_tool_input(SaveKeywordsInput, {"keywords": keywords})
    assert problem in str(caught.value)
    assert "Value error," not in str(caught.value)


def test_every_invalid_keyword_is_named() -> None:
    with pytest.raises(ToolInputError) as caught:
        parse_tool_input(SaveKeywordsInput, {"keywords": ["ok", "z", "", "y" * 60]})
    message = str(caught.value)
    assert "'z' has 1 characters" in message
    assert "can't be empty" in message
    assert "60 characters" in message


def test_keywords_are_normalised_and_deduplicated() -> None:
    saved = parse_tool_input(
        SaveKeywordsInput,
        {"keywords": [" Stripe  Webhooks ", "stripe webhooks", "E1234", "STRIPE\tWEBHOOKS"]},
    )
    assert saved.keywords == ["stripe webhooks", "e1234"]


def test_keyword_length_bounds_are_inclusive() -> None:
    saved = parse_tool_input(SaveKeywordsInput, {"keywords": ["ab", "c" * 50]})
    assert saved.keywords == ["ab", "c" * 50]


def test_ten_keywords_are_accepted() -> None:
    keywords = [f"keyword {i}" for i in range(10)]
    assert parse_tool_input(SaveKeywordsInput, {"keywords": keywords}).keywords == keywords


def test_web_tools_are_offered_only_when_asked_for_and_respond_is_last() -> None:
    with_web = [t["name"] for t in tool_definitions(web=True)]
    without = [t["name"] for t in tool_definitions()]
    assert with_web == [SEARCH_TOOL, WEB_SEARCH_TOOL, SAVE_KEYWORDS_TOOL, RESPOND_TOOL]
    assert with_web == ["search_knowledge_base", "web_search", "save_keywords", "respond"]
    assert without == ["search_knowledge_base", "respond"]
    assert [t["name"] for t in tool_definitions(web=False)] == without


# --- derive_keywords, learned_sources, learned_doc_id --------------------------------------


def _result(query: str, *titles: str) -> WebResult:
    return WebResult(
        query,
        tuple(WebSource(f"https://p{i}.example/", t, "text") for i, t in enumerate(titles)),
    )


def test_keywords_come_from_title_parts_then_the_query() -> None:
    results = [
        _result(
            "Stripe webhook 401",
            "Webhook signatures - Stripe",
            "Home | Stripe CLI · Docs",
            "Documentation » Python 3.12: What's New",
            "WEBHOOK   Signatures – Stripe",
            "A | stripe-cli",
        )
    ]
    assert derive_keywords(results, limit=20) == [
        "webhook signatures",
        "stripe",
        "stripe cli",
        "python 3.12",
        "what's new",
        "stripe-cli",
        "stripe webhook 401",
    ]


def test_keywords_stop_at_the_limit() -> None:
    results = [_result("the query", "One thing | Two thing | Three thing | Four thing")]
    assert derive_keywords(results, limit=2) == ["one thing", "two thing"]


def test_the_query_is_the_fallback_keyword() -> None:
    assert derive_keywords([WebResult("  Stripe   Webhook 401 ", ())], limit=5) == [
        "stripe webhook 401"
    ]
    generic_only = [_result("idempotency keys", "Home | Docs", "Documentation")]
    assert derive_keywords(generic_only, limit=5) == ["idempotency keys"]


def test_queries_of_several_results_are_deduplicated() -> None:
    results = [WebResult("Retry policy", ()), WebResult("retry  POLICY", ()), _result("backoff")]
    assert derive_keywords(results, limit=5) == ["retry policy", "backoff"]


def test_long_titles_are_cut_at_a_word_boundary() -> None:
    title = "Configuring exponential backoff for webhook delivery retries in production systems"
    (keyword,) = derive_keywords([_result("x", title)], limit=1)
    assert 2 <= len(keyword) <= 50
    assert title.lower().startswith(keyword)
    assert title.lower()[len(keyword)] == " "
    assert keyword == "configuring exponential backoff for webhook"


def test_learned_sources_defuse_pings_and_keep_each_page_once() -> None:
    first = WebResult(
        "q1",
        (
            WebSource(A, "<!channel> Webhooks", "Ping @everyone and <!here|here> now."),
            WebSource(B, "Retries", "Back off <@U12345> please."),
        ),
    )
    second = WebResult(
        "q2", (WebSource(A, "Other title", "Other text"), WebSource(C, "CLI", "Use the CLI."))
    )
    sources = learned_sources([first, second])
    assert [s.url for s in sources] == [A, B, C]
    by_url = {s.url: s for s in sources}
    assert "<!channel>" not in by_url[A].title
    assert "Webhooks" in by_url[A].title
    assert "@everyone" not in by_url[A].text
    assert "everyone" in by_url[A].text
    assert "<!here" not in by_url[A].text
    assert "<@U12345>" not in by_url[B].text
    assert by_url[C] == WebSource(C, "CLI", "Use the CLI.")


def test_learned_doc_id_is_stable_and_depends_on_the_text() -> None:
    one = (WebSource(A, "Webhooks", "Signed."), WebSource(B, "Retries", "Back off."))
    same = (WebSource(A, "Webhooks", "Signed."), WebSource(B, "Retries", "Back off."))
    other = (WebSource(A, "Webhooks", "Signed with HMAC."), WebSource(B, "Retries", "Back off."))
    assert learned_doc_id(one) == learned_doc_id(same)
    assert learned_doc_id(one) != learned_doc_id(other)
    assert learned_doc_id(one).startswith(LEARNED_PREFIX)
    assert learned_doc_id(one).startswith("learned:")


# --- stale_keywords --------------------------------------------------------------------------


SETTINGS = KeywordSettings(unused_days=10, min_age_days=5, min_uses=2, down_votes=2)
NO_MIN_USES = KeywordSettings(unused_days=10, min_age_days=5, min_uses=0, down_votes=2)


def _keyword(
    name: str, *, uses: int = 5, age_days: float = 100, used_days_ago: float | None = 1
) -> LearnedKeyword:
    return LearnedKeyword(
        keyword=name,
        associations=1,
        uses=uses,
        created_at=NOW - age_days * DAY,
        last_used_at=None if used_days_ago is None else NOW - used_days_ago * DAY,
    )


def _document(doc_id: str, *keywords: str) -> LearnedDocument:
    return LearnedDocument(
        doc_id=doc_id,
        question="q",
        query="q",
        sources=(WebSource(A, "T", "t"),),
        created_at=NOW - 100 * DAY,
        keywords=keywords,
    )


def _stale(
    keywords: list[LearnedKeyword],
    documents: list[LearnedDocument] | None = None,
    votes: dict[str, int] | None = None,
    settings: KeywordSettings = SETTINGS,
) -> dict[str, tuple[StaleReason, int]]:
    found = stale_keywords(keywords, documents or [], votes or {}, settings, NOW)
    return {s.keyword.keyword: (s.reason, s.votes) for s in found}


def test_fresh_or_used_keywords_stay() -> None:
    keywords = [
        _keyword("fresh", uses=0, age_days=1, used_days_ago=None),
        _keyword("used", uses=5, age_days=100, used_days_ago=1),
        _keyword("new and used", uses=1, age_days=2, used_days_ago=0),
    ]
    assert _stale(keywords) == {}


def test_unused_is_measured_from_the_last_use() -> None:
    keywords = [
        _keyword("at limit", used_days_ago=10),
        _keyword("past limit", used_days_ago=10 + 1 / DAY),
    ]
    assert _stale(keywords) == {"past limit": (StaleReason.UNUSED, 0)}


def test_unused_is_measured_from_creation_when_never_used() -> None:
    keywords = [
        _keyword("at limit", uses=0, age_days=10, used_days_ago=None),
        _keyword("past limit", uses=0, age_days=10 + 1 / DAY, used_days_ago=None),
        _keyword("old but used lately", uses=0, age_days=500, used_days_ago=9),
    ]
    assert _stale(keywords, settings=NO_MIN_USES) == {"past limit": (StaleReason.UNUSED, 0)}


def test_rarely_used_only_when_older_than_the_minimum_age() -> None:
    keywords = [
        _keyword("young", uses=1, age_days=5, used_days_ago=1),
        _keyword("old and rare", uses=1, age_days=5 + 1 / DAY, used_days_ago=1),
        _keyword("old and used enough", uses=2, age_days=50, used_days_ago=1),
        _keyword("old never used", uses=0, age_days=6, used_days_ago=None),
    ]
    assert _stale(keywords) == {
        "old and rare": (StaleReason.RARELY_USED, 0),
        "old never used": (StaleReason.RARELY_USED, 0),
    }


def test_down_votes_are_summed_over_the_keyword_documents() -> None:
    keywords = [_keyword("shared"), _keyword("single"), _keyword("other")]
    documents = [
        _document("learned:1", "shared", "single"),
        _document("learned:2", "shared"),
        _document("learned:3", "other"),
    ]
    votes = {"learned:1": -1, "learned:2": -1, "learned:3": 3, "learned:unknown": -9}
    assert _stale(keywords, documents, votes) == {"shared": (StaleReason.DOWN_VOTED, -2)}


def test_down_votes_boundary_and_up_votes_offsetting() -> None:
    keywords = [_keyword("at threshold"), _keyword("offset"), _keyword("just above")]
    documents = [
        _document("learned:1", "at threshold"),
        _document("learned:2", "offset"),
        _document("learned:3", "offset"),
        _document("learned:4", "just above"),
    ]
    votes = {"learned:1": -2, "learned:2": -2, "learned:3": 1, "learned:4": -1}
    assert _stale(keywords, documents, votes) == {"at threshold": (StaleReason.DOWN_VOTED, -2)}


def test_down_voted_is_reported_before_the_other_rules() -> None:
    keywords = [
        _keyword("everything wrong", uses=0, age_days=500, used_days_ago=None),
        _keyword("unused and rare", uses=0, age_days=500, used_days_ago=None),
    ]
    documents = [_document("learned:1", "everything wrong")]
    assert _stale(keywords, documents, {"learned:1": -3}) == {
        "everything wrong": (StaleReason.DOWN_VOTED, -3),
        "unused and rare": (StaleReason.UNUSED, 0),
    }


def test_stale_keywords_keep_the_input_order() -> None:
    keywords = [
        _keyword("b", uses=0, age_days=500, used_days_ago=None),
        _keyword("stays"),
        _keyword("a", uses=0, age_days=500, used_days_ago=None),
    ]
    found = stale_keywords(keywords, [], {}, SETTINGS, NOW)
    assert [s.keyword for s in found] == [keywords[0], keywords[2]]


# --- votes_by_learned_document ---------------------------------------------------------------


def _cite(kind: str, doc_id: object = None) -> dict[str, object]:
    citation: dict[str, object] = {"source_kind": kind, "number": 1}
    if doc_id is not None:
        citation["doc_id"] = doc_id
    return citation


def test_each_answer_vote_is_credited_once_per_learned_document() -> None:
    answers: list[tuple[list[Any], int]] = [
        (
            [
                _cite("learned", "learned:a"),
                _cite("learned", "learned:a"),
                _cite("learned", "learned:b"),
                _cite("web", "https://x.example/"),
                _cite("knowledge_base", "docs/kb.md"),
            ],
            -1,
        ),
        (
            [_cite("learned", "learned:a"), _cite("learned"), _cite("learned", ""), "junk"],
            2,
        ),
        ([_cite("knowledge_base", "learned:b")], -5),
        ([], 7),
    ]
    assert votes_by_learned_document(answers) == {"learned:a": 1, "learned:b": -1}


def test_no_answers_means_no_votes() -> None:
    assert votes_by_learned_document([]) == {}
    assert votes_by_learned_document([([_cite("web", "https://x.example/")], -3)]) == {}


def test_a_web_page_the_answer_learned_counts_for_its_learned_document() -> None:
    cited = [_cite("web", "learned:c"), _cite("web", "https://y.example/")]
    assert votes_by_learned_document([(cited, -2)]) == {"learned:c": -2}


@pytest.mark.parametrize(
    "query",
    [
        "postgres://admin:Hunter2pass@10.0.0.5:5432/prod connection refused",
        "redis://:s3cr3tPassw0rd@10.1.2.3:6379 timeout",
        "mongodb+srv://app:P4ssw0rd!@cluster0.internal/db",
        "file:///home/alice/secrets.txt",
        "mysql -u root -pS3cretPassword123",
        "grafana.acme.io/d/abc123 panel",
        "10.20.30.40:8443 refused",
        "api.internal.corp:8443 timeout",
        "fe80::1ff:fe23:4567:890a latency",
        "admin:hunter2@db.corp login",
        "zero\u200bwidth query",
    ],
)
def test_internal_addresses_and_pasted_credentials_never_leave(query: str) -> None:
    with pytest.raises(ToolInputError):
        parse_tool_input(WebSearchInput, {"query": query})


@pytest.mark.parametrize(
    "query",
    [
        "docs.stripe.com rate limits",
        "kubernetes 1.29.3 changelog",
        "c++ std::vector reserve",
        "ratio 16:9 video",
        "time 10:30:45 utc",
        "error code 0x80070005",
    ],
)
def test_ordinary_technical_queries_still_go_out(query: str) -> None:
    assert parse_tool_input(WebSearchInput, {"query": query}).query == query


def test_keywords_derived_from_titles_carry_no_mention() -> None:
    """A web page's title is untrusted: its mention syntax never becomes a learned keyword."""
    page = WebSource("https://acme.example", "<!channel> Deploy guide - <@U123> | Acme", "t")
    assert derive_keywords([WebResult("acme deploys", (page,))], 5) == ["acme", "acme deploys"]
