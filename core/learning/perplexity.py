"""Searching the web when the knowledge base is not enough: a Perplexity-style provider.

Perplexity's chat-completions API answers a query with a written summary whose sentences carry
markers `[n]` pointing at `citations[n-1]` (URLs), plus `search_results` with each page's title.
We turn that into one passage per cited page: the summary's sentences that cite it (else the
page's snippet). So a claim the model takes from the web is quoted and linked to the page that
backs it, exactly like a knowledge-base passage, instead of to a summary nobody can open.

Only the model's tailored query leaves the process (validated in `core/tools.py`); nothing else
from the conversation is sent. Everything that comes back is untrusted text.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import httpx

from core.config import WebSearchSettings, most_specific
from core.domain.text import MARKER_NUMBER, clip
from core.domain.urls import is_linkable
from core.domain.web import WebResult, WebSource
from core.errors import RemoteFailure, WebSearchError
from core.http_retry import RetryPolicy, post_json

_MARKERS = re.compile(rf"\[({MARKER_NUMBER})\]")
# "... limit.[1][2] Next" -> "... limit[1][2]. Next": markers join the sentence they close.
_MARKERS_AFTER_STOP = re.compile(rf"([.!?])((?:\[{MARKER_NUMBER}\])+)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
# What the provider is asked to do with the query. Fixed text: no conversation content.
_INSTRUCTIONS = (
    "Answer the search query factually and concisely from web sources. Cite every sentence "
    "with the number of its source, like [1]."
)


def _web_url(value: object) -> str | None:
    """A cited page's URL, if it is one an answer may link to (http(s), no userinfo, nothing
    invisible in it): it is stored, cited in later answers and shown as their source."""
    if not isinstance(value, str):
        return None
    url = value.strip()
    if not url.lower().startswith(("http://", "https://")) or not is_linkable(url):
        return None
    return url


def _fallback_title(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.netloc}{parts.path.rstrip('/')}" or url


def parse_response(query: str, data: Any, *, max_sources: int, max_source_chars: int) -> WebResult:
    """A Perplexity response as one passage per cited page (see the module docstring)."""
    try:
        content = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise WebSearchError("the web search service sent a malformed response") from None
    if not isinstance(content, str):
        raise WebSearchError("the web search service sent a malformed response")
    raw_citations = data.get("citations") if isinstance(data, dict) else None
    results = data.get("search_results") if isinstance(data, dict) else None
    titles: dict[str, str] = {}
    snippets: dict[str, str] = {}
    listed: list[str | None] = []  # search_results' pages in order, a None where a URL is bad
    for item in results if isinstance(results, list) else []:
        url = _web_url(item.get("url")) if isinstance(item, dict) else None
        listed.append(url)
        if url is None:
            continue
        if isinstance(item.get("title"), str) and item["title"].strip():
            titles[url] = item["title"].strip()
        if isinstance(item.get("snippet"), str) and item["snippet"].strip():
            snippets[url] = item["snippet"]
    # Markers number `citations`; responses without it number the search results instead.
    citations = [_web_url(c) for c in raw_citations] if isinstance(raw_citations, list) else listed
    said: dict[str, list[str]] = {}
    for sentence in _SENTENCE_END.split(_MARKERS_AFTER_STOP.sub(r"\2\1", content)):
        numbers = [int(n) for n in _MARKERS.findall(sentence)]
        plain = " ".join(_MARKERS.sub("", sentence).split())
        if not plain:
            continue
        for number in dict.fromkeys(numbers):
            if 1 <= number <= len(citations) and citations[number - 1] is not None:
                said.setdefault(str(citations[number - 1]), []).append(plain)
    sources: list[WebSource] = []
    for url in dict.fromkeys(u for u in citations if u is not None):
        text = " ".join(said.get(url, [])) or snippets.get(url, "")
        if not text.strip():
            continue  # a page nothing was taken from can't support a claim
        title = titles.get(url) or _fallback_title(url)
        sources.append(WebSource(url, clip(title, 300), clip(text, max_source_chars)))
        if len(sources) == max_sources:
            break
    return WebResult(query, tuple(sources))


class PerplexitySearch:
    """The Perplexity chat-completions API over httpx, with timeouts and retries."""

    def __init__(self, http: httpx.AsyncClient, settings: WebSearchSettings, api_key: str) -> None:
        self._http = http
        self._settings = settings
        self._url = settings.base_url.rstrip("/") + "/chat/completions"
        self._headers = {"Authorization": f"Bearer {api_key}"}

    async def search(self, query: str) -> WebResult:
        s = self._settings
        body = {
            "model": s.model,
            "messages": [
                {"role": "system", "content": _INSTRUCTIONS},
                {"role": "user", "content": query},
            ],
        }
        try:
            response = await post_json(
                self._http,
                self._url,
                body,
                headers=self._headers,
                policy=RetryPolicy(s.max_retries, s.retry_initial_s, s.retry_max_s),
                timeout_s=s.timeout_s,
            )
        except RemoteFailure as exc:
            raise WebSearchError(f"the web search service {exc}") from None
        if response.status_code in (401, 403):
            raise WebSearchError("the web search service refused the API key")
        if response.status_code >= 400:
            raise WebSearchError(f"the web search service answered HTTP {response.status_code}")
        try:
            data = response.json()
        except ValueError:
            raise WebSearchError("the web search service sent a malformed response") from None
        return parse_response(
            query, data, max_sources=s.max_sources, max_source_chars=s.max_source_chars
        )

    async def close(self) -> None:
        await self._http.aclose()


def web_search_allowed(settings: WebSearchSettings, conversation_key: str) -> bool:
    """Whether the web may be searched for this conversation: the most specific entry of
    `channels` (a conversation-key prefix, matched on whole segments) wins over `enabled`."""
    return [settings.enabled, *most_specific(settings.channels, conversation_key)][-1]
