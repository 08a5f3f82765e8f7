"""A local Confluence that serves the documented response shapes of both APIs a sync uses:
Cloud's REST v2 (`/wiki/api/v2/spaces`, `/spaces/{id}/pages`, `/pages/{id}`, cursor pagination
in `_links.next` relative to the site's root) and Data Center's REST (`/rest/api/content` with
`spaceKey`, `expand`, `start`/`limit` offsets in `_links.next` relative to the base URL).

Attachments as both list them through CQL search (`/rest/api/content/search`, under `/wiki` on
Cloud, its `_links.next` relative to the base URL) and serve them at
`/download/attachments/{page id}/{file name}`: Data Center directly, Cloud by a redirect to
its media host, which here is the same server under another name (`localhost` for
`127.0.0.1`), so a credential sent on is seen.

It counts what it is asked (listings and page bodies apart), can answer the next requests with
429 and a `Retry-After`, checks the credentials, and lets a test edit, delete or add pages
between syncs."""

from __future__ import annotations

import base64
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import quote, urlencode

from aiohttp import web

CLOUD_MAX_LIMIT = 250
_KINDS = {"pages": "page", "blogposts": "blogpost"}  # Cloud's collections, by URL segment
DATACENTER_MAX_LIMIT = 100
# The emulator serves listings in pages this small, so that every sync follows several cursors.
SERVED_PAGE_SIZE = 40


@dataclass
class FakePage:
    page_id: str
    space: str
    title: str
    body: str
    version: int = 1
    kind: Literal["page", "blogpost"] = "page"


@dataclass
class FakeAttachment:
    attachment_id: str
    page_id: str
    filename: str
    media_type: str
    data: bytes
    version: int = 1
    listed_size: int | None = None  # the size the listing claims (None: the data's)


@dataclass
class FakeConfluence:
    flavour: Literal["cloud", "datacenter"]
    authorization: str
    pages: dict[str, FakePage] = field(default_factory=dict)
    space_ids: dict[str, str] = field(default_factory=dict)
    requests: Counter[str] = field(default_factory=Counter)
    throttle: int = 0  # the next this many requests are answered 429
    retry_after: str = "0"
    base: str = ""  # the server's root URL, set once it listens
    next_link: str | None = None  # a listing's `_links.next` as a hostile server would set it
    # page id -> how its body is answered instead: an HTTP status, "not json" or "bad gzip"
    broken: dict[str, int | str] = field(default_factory=dict)
    attachments: dict[str, FakeAttachment] = field(default_factory=dict)
    # The Authorization header each request to the media host carried (None: none).
    media_authorizations: list[str | None] = field(default_factory=list)
    downloaded: list[str] = field(default_factory=list)  # the raw paths of download requests
    search_status: int | None = None  # CQL search answers with this status instead
    media_host: str | None = None  # where Cloud's downloads redirect (None: this server)

    @classmethod
    def seeded(
        cls, flavour: Literal["cloud", "datacenter"], authorization: str, spaces: dict[str, int]
    ) -> FakeConfluence:
        fake = cls(flavour, authorization)
        next_id = 1000
        for n, (key, count) in enumerate(spaces.items()):
            fake.space_ids[key] = str(90_000 + n)
            for i in range(count):
                next_id += 1
                fake.pages[str(next_id)] = FakePage(
                    str(next_id), key, f"{key} page {i}", storage_body(key, i)
                )
                fake.attach(str(next_id), f"diagram-{i}.png", "image/png", PNG)
        return fake

    def attach(self, page_id: str, filename: str, media_type: str, data: bytes) -> FakeAttachment:
        attachment = FakeAttachment(
            f"att{len(self.attachments) + 1}", page_id, filename, media_type, data
        )
        self.attachments[attachment.attachment_id] = attachment
        return attachment

    # -- HTTP ------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._gate])
        app.router.add_get("/wiki/api/v2/spaces", self._cloud_spaces)
        app.router.add_get("/wiki/api/v2/spaces/{space_id}/pages", self._cloud_pages)
        app.router.add_get("/wiki/api/v2/pages/{page_id}", self._cloud_page)
        app.router.add_get("/wiki/api/v2/spaces/{space_id}/blogposts", self._cloud_pages)
        app.router.add_get("/wiki/api/v2/blogposts/{page_id}", self._cloud_page)
        app.router.add_get("/rest/api/space/{key}", self._dc_space)
        app.router.add_get("/rest/api/content", self._dc_content)
        app.router.add_get("/rest/api/content/search", self._search)
        app.router.add_get("/wiki/rest/api/content/search", self._search)
        app.router.add_get("/rest/api/content/{page_id}", self._dc_page)
        app.router.add_get("/download/attachments/{page_id}/{filename}", self._download)
        app.router.add_get("/wiki/download/attachments/{page_id}/{filename}", self._download)
        app.router.add_get("/media/{attachment_id}/binary", self._media)
        return app

    @web.middleware
    async def _gate(self, request: web.Request, handler):  # type: ignore[no-untyped-def]
        if request.path.startswith("/media/"):  # the media host takes its URL's token alone
            return await handler(request)
        if self.throttle > 0:
            self.throttle -= 1
            self.requests["429"] += 1
            return web.json_response(
                {"statusCode": 429, "message": "Rate limited"},
                status=429,
                headers={"Retry-After": self.retry_after},
            )
        if request.headers.get("Authorization") != self.authorization:
            self.requests["401"] += 1
            return web.json_response({"statusCode": 401, "message": "Unauthorized"}, status=401)
        return await handler(request)

    async def _cloud_spaces(self, request: web.Request) -> web.Response:
        self.requests["spaces"] += 1
        keys = request.query.get("keys", "").split(",")
        results = [
            {"id": self.space_ids[k], "key": k, "name": f"Space {k}", "type": "global"}
            for k in keys
            if k in self.space_ids
        ]
        return web.json_response({"results": results, "_links": {"base": self.base + "/wiki"}})

    async def _dc_space(self, request: web.Request) -> web.Response:
        """Data Center's one space by key; 404 for a key it does not have."""
        self.requests["space"] += 1
        key = request.match_info["key"]
        if key not in self.space_ids:
            return web.json_response({"statusCode": 404, "message": "No space"}, status=404)
        return web.json_response({"id": self.space_ids[key], "key": key, "name": f"Space {key}"})

    async def _cloud_pages(self, request: web.Request) -> web.Response:
        self.requests["listing"] += 1
        space = next(k for k, v in self.space_ids.items() if v == request.match_info["space_id"])
        limit = min(int(request.query.get("limit", "25")), CLOUD_MAX_LIMIT, SERVED_PAGE_SIZE)
        start = _decode_cursor(request.query.get("cursor"))
        collection = request.path.rsplit("/", 1)[1]  # pages or blogposts
        chunk, more = self._slice(space, start, limit, _KINDS[collection])
        links: dict[str, str] = {"base": self.base + "/wiki"}
        if more:
            query = urlencode({"limit": limit, "cursor": _encode_cursor(start + limit)})
            links["next"] = f"/wiki/api/v2/spaces/{self.space_ids[space]}/{collection}?{query}"
        if self.next_link:
            links["next"] = self.next_link
        results = [self._cloud_result(page, body=False) for page in chunk]
        return web.json_response({"results": results, "_links": links})

    async def _cloud_page(self, request: web.Request) -> web.Response:
        self.requests["page"] += 1
        if (broken := self.broken.get(request.match_info["page_id"])) is not None:
            return _broken(broken)
        page = self.pages.get(request.match_info["page_id"])
        if page is None or _KINDS[request.path.split("/")[-2]] != page.kind:
            return web.json_response({"errors": [{"status": 404}]}, status=404)
        return web.json_response(self._cloud_result(page, body=True))

    async def _dc_content(self, request: web.Request) -> web.Response:
        self.requests["listing"] += 1
        space = request.query["spaceKey"]
        limit = min(int(request.query.get("limit", "25")), DATACENTER_MAX_LIMIT, SERVED_PAGE_SIZE)
        start = int(request.query.get("start", "0"))
        chunk, more = self._slice(space, start, limit, request.query.get("type", "page"))
        links: dict[str, str] = {"base": self.base, "context": ""}
        if more:
            query = urlencode(
                {**request.query, "start": start + limit, "limit": limit}  # as Confluence does
            )
            links["next"] = f"/rest/api/content?{query}"
        if self.next_link:
            links["next"] = self.next_link
        results = [self._dc_result(page, body=False) for page in chunk]
        listing = {"results": results, "start": start, "limit": limit, "size": len(chunk)}
        return web.json_response({**listing, "_links": links})

    async def _dc_page(self, request: web.Request) -> web.Response:
        self.requests["page"] += 1
        if (broken := self.broken.get(request.match_info["page_id"])) is not None:
            return _broken(broken)
        page = self.pages.get(request.match_info["page_id"])
        if page is None:
            return web.json_response({"statusCode": 404, "message": "No content"}, status=404)
        return web.json_response(self._dc_result(page, body=True))

    async def _search(self, request: web.Request) -> web.Response:
        """CQL search, as far as a sync uses it: one space's attachments."""
        self.requests["attachments"] += 1
        if self.search_status is not None:
            return _broken(self.search_status)
        cql = re.fullmatch(
            r'space = "((?:[^"\\]|\\.)*)" AND type = attachment', request.query["cql"]
        )
        if cql is None:
            return web.json_response({"statusCode": 400, "message": "bad CQL"}, status=400)
        space = re.sub(r"\\(.)", r"\1", cql.group(1))
        found = [
            a
            for a in self.attachments.values()
            if (page := self.pages.get(a.page_id)) is not None and page.space == space
        ]
        cloud = self.flavour == "cloud"
        limit = min(int(request.query.get("limit", "25")), DATACENTER_MAX_LIMIT, SERVED_PAGE_SIZE)
        start = (
            _decode_cursor(request.query.get("cursor"))
            if cloud
            else int(request.query.get("start", "0"))
        )
        links: dict[str, str] = {"base": self.base + ("/wiki" if cloud else ""), "context": ""}
        if start + limit < len(found):
            query = {k: v for k, v in request.query.items() if k not in ("start", "cursor")}
            following = (
                {"cursor": _encode_cursor(start + limit)} if cloud else {"start": start + limit}
            )
            links["next"] = "/rest/api/content/search?" + urlencode({**query, **following})
        results = [self._attachment_result(a) for a in found[start : start + limit]]
        return web.json_response({"results": results, "size": len(results), "_links": links})

    async def _download(self, request: web.Request) -> web.StreamResponse:
        self.requests["download"] += 1
        self.downloaded.append(request.raw_path)
        page_id, filename = request.match_info["page_id"], request.match_info["filename"]
        attachment = next(
            (
                a
                for a in self.attachments.values()
                if (a.page_id, a.filename) == (page_id, filename)
            ),
            None,
        )
        if attachment is None:
            return web.json_response({"statusCode": 404, "message": "No attachment"}, status=404)
        if (broken := self.broken.get(attachment.attachment_id)) is not None:
            return _broken(broken)
        if self.flavour == "cloud":
            media = self.media_host or self.base.replace("127.0.0.1", "localhost")
            raise web.HTTPFound(f"{media}/media/{attachment.attachment_id}/binary?token=t0k")
        return web.Response(body=attachment.data, content_type=attachment.media_type)

    async def _media(self, request: web.Request) -> web.Response:
        self.requests["media"] += 1
        self.media_authorizations.append(request.headers.get("Authorization"))
        attachment = self.attachments[request.match_info["attachment_id"]]
        return web.Response(body=attachment.data, content_type=attachment.media_type)

    # -- shapes ----------------------------------------------------------------------------

    def _slice(self, space: str, start: int, limit: int, kind: str) -> tuple[list[FakePage], bool]:
        pages = [p for p in self.pages.values() if p.space == space and p.kind == kind]
        return pages[start : start + limit], start + limit < len(pages)

    def _cloud_result(self, page: FakePage, *, body: bool) -> dict[str, object]:
        return {
            "id": page.page_id,
            "status": "current",
            "title": page.title,
            "spaceId": self.space_ids[page.space],
            "parentType": "page",
            "authorId": "5b10ac8d82e05b22cc7d4ef5",
            "createdAt": "2026-01-01T00:00:00.000Z",
            "version": {
                "createdAt": "2026-11-01T00:00:00.000Z",
                "message": "",
                "number": page.version,
                "minorEdit": False,
                "authorId": "5b10ac8d82e05b22cc7d4ef5",
            },
            "body": (
                {"storage": {"representation": "storage", "value": page.body}} if body else {}
            ),
            "_links": {
                "webui": f"/spaces/{page.space}/"
                + ("pages/" if page.kind == "page" else "blog/2026/11/01/")
                + f"{page.page_id}/{_pretty(page.title)}",
                "editui": f"/pages/resumedraft.action?draftId={page.page_id}",
                "tinyui": f"/x/{page.page_id}",
            },
        }

    def _dc_result(self, page: FakePage, *, body: bool) -> dict[str, object]:
        result: dict[str, object] = {
            "id": page.page_id,
            "type": page.kind,
            "status": "current",
            "title": page.title,
            "version": {"number": page.version, "when": "2026-11-01T00:00:00.000Z"},
            "_links": {
                "webui": f"/display/{page.space}/"
                + ("" if page.kind == "page" else "2026/11/01/")
                + _pretty(page.title),
                "tinyui": f"/x/{page.page_id}",
                "self": f"{self.base}/rest/api/content/{page.page_id}",
            },
            "_expandable": {"ancestors": "", "space": f"/rest/api/space/{page.space}"},
        }
        if body:
            result["body"] = {"storage": {"value": page.body, "representation": "storage"}}
        return result

    def _attachment_result(self, attachment: FakeAttachment) -> dict[str, object]:
        page = self.pages[attachment.page_id]
        name = quote(attachment.filename)
        size = attachment.listed_size
        return {
            "id": attachment.attachment_id,
            "type": "attachment",
            "status": "current",
            "title": attachment.filename,
            "metadata": {"mediaType": attachment.media_type},
            "extensions": {
                "mediaType": attachment.media_type,
                "fileSize": len(attachment.data) if size is None else size,
                "comment": "",
            },
            "version": {"number": attachment.version, "when": "2026-11-01T00:00:00.000Z"},
            "container": {"id": page.page_id, "type": "page", "title": page.title},
            "_links": {
                "webui": f"/pages/viewpageattachments.action?pageId={page.page_id}",
                "download": f"/download/attachments/{page.page_id}/{name}"
                f"?version={attachment.version}&modificationDate=1761955200000&api=v2",
            },
        }


def _broken(how: int | str) -> web.Response:
    if isinstance(how, int):
        return web.json_response({"statusCode": how, "message": "broken"}, status=how)
    if how == "bad gzip":  # a proxy that garbles what it compresses
        headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
        return web.Response(body=b"\x1f\x8b not gzip", headers=headers)
    return web.Response(text="<html>Service Unavailable</html>", content_type="text/html")


def storage_body(space: str, n: int) -> str:
    """A page in the storage format: headings, a code macro with parameters, an attached image
    and a link to an attachment."""
    return (
        f"<p>Overview of {space} topic {n}.</p>"
        f"<h2>Setting up topic {n}</h2>"
        f"<p>Run the setup for {space}-{n} with the standard profile.</p>"
        '<ac:structured-macro ac:name="code"><ac:parameter ac:name="language">bash'
        f"</ac:parameter><ac:plain-text-body><![CDATA[make setup-{n}]]></ac:plain-text-body>"
        "</ac:structured-macro>"
        f'<ac:image><ri:attachment ri:filename="diagram-{n}.png" /></ac:image>'
        f"<h2>Troubleshooting topic {n}</h2>"
        f"<p>When {space}-{n} fails, restart the agent.</p>"
    )


# The 8-byte signature and a header chunk: what an attached screenshot starts with.
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01"


def _pretty(title: str) -> str:
    return title.replace(" ", "+")


def _encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode()


def _decode_cursor(cursor: str | None) -> int:
    if not cursor:
        return 0
    return int(json.loads(base64.urlsafe_b64decode(cursor.encode()))["o"])
