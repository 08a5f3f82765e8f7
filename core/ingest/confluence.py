"""Confluence spaces as a source: Cloud (REST v2, cursor pages) or Data Center (REST
`/rest/api/content`, offset pages), the pages of the configured spaces.

A sync lists each space's pages with their version numbers only (no bodies), then asks for the
body of a page only when its version moved since the last completed sync or the index lacks it:
an unchanged space costs its listing and nothing more. Bodies come in the storage format
(XHTML with `ac:`/`ri:` elements): headings get the ids Confluence gives them, so a citation
lands on its heading; macro parameters are dropped. Blog posts are read as pages are, when
`ingest.confluence.blogposts` is on. The files attached to the pages are documents too
(`core.ingest.confluence_attachments`), downloaded when their version moved.
429s and 5xx are retried after `Retry-After`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, urlencode, urljoin, urlsplit

import httpx

from core.config import IngestSettings
from core.domain.urls import redact_url
from core.errors import (
    BotError,
    RemoteFailure,
    SourceUnavailable,
    UnreachableDocument,
    UnreadableDocument,
)
from core.http_retry import RetryPolicy, WaitBudget, get_json
from core.ingest.confluence_attachments import Attachment, attachments_url, listed_attachment
from core.ingest.daemon_work import run_abandonable
from core.ingest.formats import DocumentFormat, not_parsed
from core.ingest.html import neutralise_unclosed_markup
from core.ingest.memory import load_json, save_json
from core.ingest.sources import (
    Discovery,
    NotModified,
    Skipped,
    SourceItem,
    read_item,
    too_big,
)

Flavour = Literal["cloud", "datacenter"]
Kind = Literal["page", "blogpost"]
_CLOUD_PATHS: dict[Kind, str] = {"page": "pages", "blogpost": "blogposts"}  # v2's collections
_UNAUTHORISED = frozenset({401, 403})
_NOT_FOUND = 404
_WHITESPACE = re.compile(r"\s+")
_ATTACHMENTS = "attachment/"  # within a space's scope, what its files' doc ids start with
_KEPT = " (the files indexed before are kept)"
_CLIENT_ERRORS = 400  # from here on, an HTTP status is a failure
_SERVER_ERRORS = 500  # ... and from here on, the server's, for now
_RATE_LIMITED = 429


@dataclass(frozen=True, slots=True)
class _Page:
    page_id: str
    space: str
    title: str
    version: int
    link: str
    kind: Kind = "page"


def flavour_of(base_url: str) -> Flavour:
    """Cloud sites live on atlassian.net; anything else is a Data Center (or Server) install."""
    host = (urlsplit(base_url).hostname or "").lower()
    return "cloud" if host.endswith(".atlassian.net") else "datacenter"


def heading_anchor(flavour: Flavour, page_title: str, heading: str) -> str:
    """The id Confluence renders a heading with: Cloud joins the heading's words with hyphens;
    Data Center prefixes the page title and drops the spaces (`PageTitle-HeadingText`)."""
    if flavour == "cloud":
        return "-".join(heading.split())
    return _WHITESPACE.sub("", page_title) + "-" + _WHITESPACE.sub("", heading)


def storage_to_html(storage: str, flavour: Flavour, title: str) -> str:
    """A page's storage format as HTML the HTML reader takes (headings with Confluence's ids,
    macro parameters gone, images as `<img>` with their alt text).

    Markup that never closes is made text first, as for any HTML page: html.parser rescans
    from each unclosed `<` to the end, and 420 KB of `<ac:structured-macro ` took 115 s, on a
    parse thread no deadline can stop (two such pages and no page of any sync in the process
    found a free one)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(neutralise_unclosed_markup(storage), "html.parser")
    for parameter in soup.find_all("ac:parameter"):
        parameter.decompose()
    for image in soup.find_all("ac:image"):  # its alt text, as an HTML image's (`image_text`)
        image.replace_with(soup.new_tag("img", attrs={"alt": str(image.get("ac:alt") or "")}))
    seen: dict[str, int] = {}
    for heading in soup.find_all(["h1", "h2", "h3", "h4", "h5", "h6"]):
        anchor = heading_anchor(flavour, title, heading.get_text(" ", strip=True))
        seen[anchor] = seen.get(anchor, 0) + 1
        heading["id"] = anchor if seen[anchor] == 1 else f"{anchor}.{seen[anchor] - 1}"
    escaped = title.replace("&", "&amp;").replace("<", "&lt;")  # all a <title>'s text needs
    return f"<html><head><title>{escaped}</title></head><body>{soup}</body></html>"


class ConfluenceConnector:
    def __init__(
        self,
        base_url: str,
        spaces: list[str],
        settings: IngestSettings,
        http: httpx.AsyncClient,
        *,
        flavour: Flavour,
        headers: dict[str, str],
        memory: Path,
        known: set[str],
    ) -> None:
        """`headers`: the credentials (Basic email:token on Cloud, Bearer PAT on Data Center);
        `memory`: where the versions of the last completed sync are kept."""
        self._base = base_url.rstrip("/")
        self._spaces = spaces
        self._settings = settings
        self._http = http
        self._flavour = flavour
        self._credentials = headers
        self._headers = {"Accept": "application/json", **headers}
        self._memory_path = memory
        self._known = known
        self._policy = RetryPolicy(
            retries=settings.confluence.retries, initial_s=1.0, max_s=settings.confluence.max_wait_s
        )
        # Shared by every request of a sync: throttled throughout, it ends in bounded time.
        self._budget = WaitBudget(settings.confluence.max_total_wait_s)
        self._versions: dict[str, int] = _load(memory)
        self._listed: dict[str, _Page | Attachment] = {}
        # Attachments no parser reads, by the doc id of their page: reported when the page is
        # read (new or edited), not at every sync.
        self._unread: dict[str, list[Attachment]] = {}
        self._read_pages: set[str] = set()

    async def discover(self) -> Discovery:
        shown = redact_url(self._base)
        found = Discovery(items=[], skipped=[], scopes=[])
        listing = self._cloud_pages if self._flavour == "cloud" else self._datacenter_pages
        kinds: list[Kind] = (
            ["page", "blogpost"] if self._settings.confluence.blogposts else ["page"]
        )
        for key, space_id in (await self._space_ids()).items():
            scope = f"confluence:{shown}/{key}/"
            found.scopes.append(scope)
            pages: dict[str, _Page] = {}  # pages and blog posts: ids are unique across both
            for page in [page for kind in kinds for page in await listing(key, space_id, kind)]:
                doc_id = scope + page.page_id
                if not page.page_id or doc_id in self._listed:  # no id to ask for; listed twice
                    continue
                self._listed[doc_id] = pages[page.page_id] = page
                found.items.append(SourceItem(doc_id, page.link, _display(page), page.title))
            if self._settings.confluence.attachments:
                try:
                    found.items += await self._attachment_items(key, scope, pages)
                except SourceUnavailable as exc:  # the pages are synced all the same
                    found.skipped.append(Skipped(f"{key}: attachments", f"{exc}{_KEPT}"))
                    found.unseen.append(scope + _ATTACHMENTS)
        found.items.sort(key=lambda item: item.doc_id)
        return found

    async def _attachment_items(
        self, key: str, scope: str, pages: dict[str, _Page]
    ) -> list[SourceItem]:
        """The space's attachments that can become documents; those of a page not listed
        (a blog post's, a draft's, another space's) are left out."""
        items, seen = [], set()
        async for result in self._results(attachments_url(self._base, key, self._page_size)):
            attachment = listed_attachment(result, self._base)
            if attachment is None or (page := pages.get(attachment.page_id)) is None:
                continue
            doc_id = scope + _ATTACHMENTS + attachment.attachment_id
            if doc_id in seen or doc_id in self._listed:  # listed twice, or a page's id
                continue
            seen.add(doc_id)
            if attachment.fmt is None:
                self._unread.setdefault(scope + page.page_id, []).append(attachment)
                continue
            self._listed[doc_id] = attachment
            display = f"{_display(page)} / {attachment.filename}"
            items.append(
                SourceItem(doc_id, attachment.url, display, attachment.filename, fmt=attachment.fmt)
            )
        return items

    async def fetch(self, item: SourceItem) -> tuple[bytes, DocumentFormat]:
        page = self._listed[item.doc_id]
        if self._versions.get(item.doc_id) == page.version and item.doc_id in self._known:
            raise NotModified(item.doc_id)
        if isinstance(page, Attachment):
            return await self._download(item, page)
        # The id as one path segment, whatever the server listed: a '#' or '?' in it would ask
        # for another page, a control character would be a URL httpx refuses.
        page_id = quote(page.page_id, safe="")
        if self._flavour == "cloud":
            url = f"{self._base}/api/v2/{_CLOUD_PATHS[page.kind]}/{page_id}?body-format=storage"
        else:
            url = f"{self._base}/rest/api/content/{page_id}?expand=body.storage,version"
        body = await self._page_body(url)
        storage = _text_at(body, "body", "storage", "value")
        if len(storage.encode("utf-8")) > self._settings.max_file_bytes:
            raise too_big(self._settings.max_file_bytes)
        self._read_pages.add(item.doc_id)
        try:
            page_html = await run_abandonable(
                functools.partial(storage_to_html, storage, self._flavour, page.title),
                self._settings.parse_timeout_s,
                self._settings.parse_threads,
            )
        except TimeoutError as late:
            raise not_parsed(late, self._settings.parse_timeout_s) from None
        return page_html.encode("utf-8"), DocumentFormat.HTML

    async def _download(
        self, item: SourceItem, attachment: Attachment
    ) -> tuple[bytes, DocumentFormat]:
        """An attachment's bytes, read as any URL is (bounded, its redirects judged); the
        credentials go to the site only, never to where it redirects (Cloud's media host)."""
        if attachment.size is not None and attachment.size > self._settings.max_file_bytes:
            raise too_big(self._settings.max_file_bytes)  # known from the listing: not fetched
        return await read_item(
            item,
            max_bytes=self._settings.max_file_bytes,
            client=self._http,
            deadline_s=self._settings.url_deadline_s,
            credentials=self._credentials,
        )

    def also_skipped(self) -> list[Skipped]:
        """The attachments of a type not read, of the pages read this sync."""
        return [
            Skipped(f"{_display(page)} / {attachment.filename}", attachment.why_not_read)
            for doc_id in sorted(self._read_pages)
            if isinstance(page := self._listed[doc_id], _Page)
            for attachment in self._unread.get(doc_id, [])
        ]

    async def completed(self, settled: set[str]) -> None:
        """Each page's version as indexed this sync; a page that could not be (its body not
        read, not parsed in time, its write failed) keeps the version remembered before, so the
        next sync asks for it again."""
        versions = {
            doc_id: page.version if doc_id in settled else self._versions.get(doc_id)
            for doc_id, page in self._listed.items()
        }
        save_json(self._memory_path, {d: v for d, v in versions.items() if v is not None})

    # -- listings --------------------------------------------------------------------------

    async def _space_ids(self) -> dict[str, str]:
        """Each configured space key with its id (Cloud's v2 API lists pages by space id); a key
        the site does not have fails the sync, since pruning would empty that space."""
        if self._flavour == "datacenter":
            # Data Center lists a key it does not have as a space without pages: asked apart.
            ids = {key: key for key in self._spaces if await self._datacenter_space(key)}
        else:
            query = urlencode({"keys": ",".join(self._spaces), "limit": self._page_size})
            ids = {
                str(space.get("key")): str(space.get("id"))
                async for space in self._results(f"{self._base}/api/v2/spaces?{query}")
            }
        if missing := [key for key in self._spaces if key not in ids]:
            raise SourceUnavailable(f"Confluence has no space {', '.join(missing)} (or no access)")
        return {key: ids[key] for key in self._spaces}

    async def _datacenter_space(self, key: str) -> bool:
        """Whether the site has the space (404: no such key, or no permission to see it)."""
        url = f"{self._base}/rest/api/space/{quote(key, safe='')}"
        return (await self._response(url)).status_code != _NOT_FOUND

    async def _cloud_pages(self, key: str, space_id: str, kind: Kind) -> list[_Page]:
        query = urlencode({"status": "current", "limit": self._page_size})
        url = f"{self._base}/api/v2/spaces/{space_id}/{_CLOUD_PATHS[kind]}?{query}"
        return [self._page(key, result, kind) async for result in self._results(url)]

    async def _datacenter_pages(self, key: str, _space_id: str, kind: Kind) -> list[_Page]:
        query = urlencode(
            {
                "spaceKey": key,
                "type": kind,
                "status": "current",
                "expand": "version",
                "limit": self._page_size,
            }
        )
        url = f"{self._base}/rest/api/content?{query}"
        return [self._page(key, result, kind) async for result in self._results(url)]

    def _page(self, key: str, result: dict[str, Any], kind: Kind) -> _Page:
        page_id = str(result.get("id", ""))
        title = str(result.get("title") or page_id)
        version = result.get("version")
        number = version.get("number") if isinstance(version, dict) else None
        webui = _text_at(result, "_links", "webui")
        # Only a path on this site is taken as the page's link; anything else (an absolute URL
        # elsewhere, a javascript: link) is replaced by the page's id link (a blog post's too,
        # on both flavours).
        if webui.startswith("/") and not webui.startswith("//"):
            link = self._base + webui
        elif self._flavour == "cloud" and kind == "page":
            link = f"{self._base}/spaces/{key}/pages/{page_id}"
        else:
            link = f"{self._base}/pages/viewpage.action?pageId={page_id}"
        return _Page(page_id, key, title, number if isinstance(number, int) else -1, link, kind)

    async def _results(self, url: str) -> AsyncIterator[dict[str, Any]]:
        """Every result of a listing, following `_links.next` (a cursor on Cloud, an offset
        on Data Center)."""
        requested: set[str] = set()
        next_url: str | None = url
        while next_url is not None:
            # A `next` back to a page already read is a loop: said at once, rather than after
            # max_listing_pages requests (10,000 by default) of the same few pages.
            if next_url in requested:
                raise SourceUnavailable(
                    "Confluence's listing came back to a page it had sent already (a loop)"
                )
            requested.add(next_url)
            if len(requested) > self._settings.confluence.max_listing_pages:
                raise SourceUnavailable(
                    f"Confluence listing longer than {len(requested) - 1} pages "
                    "(ingest.confluence.max_listing_pages)"
                )
            body = self._json(await self._response(next_url), next_url)
            for result in body.get("results") or []:
                if isinstance(result, dict):
                    yield result
            following = _text_at(body, "_links", "next")
            next_url = self._next(following) if following else None

    def _next(self, link: str) -> str:
        """A listing's next page. A path is relative to the base URL (Data Center, Cloud's
        CQL search), unless it already starts with the base's path (Cloud v2's `/wiki/api/v2/`
        links, a Data Center context path)."""
        if link.startswith("/") and not link.startswith("//"):
            root = self._base
            if link.startswith(urlsplit(self._base).path + "/"):
                root = _origin(self._base)
            return root + link
        joined = urljoin(self._base + "/", link)
        if _origin(joined) != _origin(self._base):
            raise SourceUnavailable("Confluence pointed its next page at another site")
        return joined

    @property
    def _page_size(self) -> int:
        return self._settings.confluence.page_size

    async def _response(self, url: str) -> httpx.Response:
        """The answer to one GET, after retries; refused credentials fail the sync."""
        try:
            response = await self._get(url)
        except RemoteFailure as exc:
            raise SourceUnavailable(f"Confluence {exc}{self._out_of_time()}") from None
        _check_credentials(response)
        return response

    async def _page_body(self, url: str) -> dict[str, Any]:
        """One page's body. Its failure is that page's alone, the rest of the space is
        synced: unreachable for now (a 5xx or 429 after the retries, a dropped connection)
        keeps the indexed copy; deleted or refused skips it. Refused credentials still fail
        the sync: every other page would be refused too."""
        try:
            response = await self._get(url)
        except RemoteFailure as exc:
            raise UnreachableDocument(f"Confluence {exc}{self._out_of_time()}") from None
        _check_credentials(response)
        status = response.status_code
        if status == _NOT_FOUND:
            raise UnreadableDocument("deleted since it was listed")
        if status >= _SERVER_ERRORS or status == _RATE_LIMITED:
            raise UnreachableDocument(f"Confluence answered HTTP {status}")
        if status >= _CLIENT_ERRORS:
            raise UnreadableDocument(f"Confluence answered HTTP {status}")
        return _json_object(response, UnreadableDocument)

    async def _get(self, url: str) -> httpx.Response:
        return await get_json(
            self._http, url, headers=self._headers, policy=self._policy, budget=self._budget
        )

    def _out_of_time(self) -> str:
        if not self._budget.exhausted:
            return ""
        return (
            f" (not retried: this sync's {self._budget.total_s:g} s of waiting for retries "
            "are spent, ingest.confluence.max_total_wait_s)"
        )

    def _json(self, response: httpx.Response, url: str) -> dict[str, Any]:
        if response.status_code >= _CLIENT_ERRORS:
            shown = redact_url(url)
            raise SourceUnavailable(f"Confluence answered HTTP {response.status_code} for {shown}")
        return _json_object(response, SourceUnavailable)


def _display(page: _Page) -> str:
    return f"{page.space}: {page.title}"


def _json_object(response: httpx.Response, failure: type[BotError]) -> dict[str, Any]:
    """The body as a JSON object; else `failure`: a listing's fails the sync, a page's only
    that page."""
    try:
        body = response.json()
    except ValueError:
        raise failure("Confluence answered with something other than JSON") from None
    if not isinstance(body, dict):
        raise failure("Confluence answered with an unexpected JSON shape")
    return body


def _check_credentials(response: httpx.Response) -> None:
    if response.status_code in _UNAUTHORISED:
        raise SourceUnavailable(
            f"Confluence refused the credentials (HTTP {response.status_code}): "
            "check token_env (and username on Cloud)"
        )


def _text_at(body: dict[str, Any], *keys: str) -> str:
    value: Any = body
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, str) else ""


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _load(path: Path) -> dict[str, int]:
    kept = load_json(path)
    if not isinstance(kept, dict):
        return {}
    return {str(k): v for k, v in kept.items() if isinstance(v, int)}
