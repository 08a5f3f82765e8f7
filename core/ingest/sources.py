"""Finding what to ingest (files, folders, URLs) and reading its bytes safely.

Each item gets two identities: `doc_id`, stable wherever the bot runs from (the file's absolute
URI or the page's URL), and `url`, the link a reader follows (the published location when a base
URL is known, else the file URI).
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import os
import re
import socket
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from urllib.parse import quote, unquote, urldefrag, urlparse, urlsplit

import httpx

from core.domain.urls import redact_url, redact_urls_in
from core.errors import UnreachableDocument, UnreadableDocument
from core.http_body import ACCEPT_ENCODING, BodyTooLarge, UndecodableBody, read_body
from core.ingest.address_guard import AddressRefused, FetchStart, as_judged, fetching_from
from core.ingest.formats import BINARY_FORMATS, DocumentFormat

EXTENSIONS: dict[str, DocumentFormat] = {
    ".md": DocumentFormat.MARKDOWN,
    ".markdown": DocumentFormat.MARKDOWN,
    ".mdx": DocumentFormat.MARKDOWN,
    ".html": DocumentFormat.HTML,
    ".htm": DocumentFormat.HTML,
    ".txt": DocumentFormat.TEXT,
    ".text": DocumentFormat.TEXT,
    ".rst": DocumentFormat.RST,
    ".adoc": DocumentFormat.ASCIIDOC,
    ".asciidoc": DocumentFormat.ASCIIDOC,
    ".asc": DocumentFormat.ASCIIDOC,
    ".pdf": DocumentFormat.PDF,
    ".docx": DocumentFormat.WORD,
    ".pptx": DocumentFormat.SLIDES,
    ".xlsx": DocumentFormat.SHEETS,
}
# Files a newcomer may expect to be read, and what to do with them instead.
_CONVERSIONS = {
    ".doc": "Word 97-2003: save it as .docx",
    ".rtf": "save it as .docx",
    ".odt": "save it as .docx",
    ".ppt": "PowerPoint 97-2003: save it as .pptx",
    ".odp": "save it as .pptx",
    ".xls": "Excel 97-2003: save it as .xlsx",
    ".ods": "save it as .xlsx",
}
CONTENT_TYPES: dict[str, DocumentFormat] = {
    "text/html": DocumentFormat.HTML,
    "application/xhtml+xml": DocumentFormat.HTML,
    "text/markdown": DocumentFormat.MARKDOWN,
    "text/x-markdown": DocumentFormat.MARKDOWN,
    "text/plain": DocumentFormat.TEXT,
    "text/x-rst": DocumentFormat.RST,
    "application/pdf": DocumentFormat.PDF,
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": DocumentFormat.WORD,
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": (
        DocumentFormat.SLIDES
    ),
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": DocumentFormat.SHEETS,
}


# Redirects followed per URL before it is skipped (browsers and httpx stop at 20 too).
MAX_REDIRECTS = 20
HTTP_NOT_MODIFIED = 304
_FOLDER_LINK = "symlink to a folder (not followed)"
_OUTSIDE_LINK = "symlink to a file outside the folder (not followed)"
_CANT_READ = "can't read"
_FILE_KINDS = {
    stat.S_IFIFO: "named pipe",
    stat.S_IFSOCK: "socket",
    stat.S_IFCHR: "character device",
    stat.S_IFBLK: "block device",
}


@dataclass(frozen=True, slots=True)
class SourceItem:
    doc_id: str
    url: str
    display: str
    fallback_title: str
    path: Path | None = None
    fmt: DocumentFormat | None = None
    # Credentials from a URL's user:password@ part: sent with the request, never stored or shown.
    auth: tuple[str, str] | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class Skipped:
    display: str
    reason: str


@dataclass(slots=True)
class Discovery:
    items: list[SourceItem]
    skipped: list[Skipped]
    # doc_id prefixes this run speaks for: `--prune` may delete only documents under them.
    scopes: list[str]
    # Targets that named nothing (missing, empty): a mistake the command reports as an error.
    missing: list[Skipped] = field(default_factory=list)
    # doc_id prefixes inside a scope that this run could not look into (a folder it could not
    # list, a file it could not even stat): what the index holds there is not known to be
    # gone, so `--prune` keeps it.
    unseen: list[str] = field(default_factory=list)


def is_url(target: str) -> bool:
    """Whether `target` is meant as a web address, well formed or not: a malformed one
    (`http://[::1`) is a URL to report as such (`url_problem`), never a path to look for."""
    try:
        scheme = urlsplit(target).scheme
    except ValueError:  # the authority is malformed; the scheme before it is still read
        scheme = target.partition(":")[0].strip().lower()
    return scheme in ("http", "https")


def url_problem(url: str) -> str | None:
    """Why `url` can't be requested as written (no host, a malformed host or port), or None.

    Checked before each request: httpx accepts a port out of range (`:99999`), and the socket
    layer then fails with an `OverflowError` inside an `ExceptionGroup`, which no caller of
    httpx expects."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (reading it is the check: it raises when out of range)
        httpx.URL(url)
    except (ValueError, httpx.InvalidURL) as exc:
        detail = str(exc)
        return f"not a valid URL: {detail[:1].lower() + detail[1:]}"
    if not parts.hostname:
        return "not a valid URL: no host"
    return None


def userinfo(url: str) -> tuple[str, str] | None:
    """The user and password a URL holds (`https://user:pw@host/`), to send as basic auth."""
    parts = urlsplit(url)
    if parts.username is None:
        return None
    return unquote(parts.username), unquote(parts.password or "")


def printable(name: str) -> str:
    """A file name safe to show, store and embed: bytes that are not UTF-8 (kept by Python as
    lone surrogates, which no encoder accepts) become U+FFFD."""
    return os.fsencode(name).decode("utf-8", "replace")


def title_from_name(name: str) -> str:
    words = Path(name).stem.replace("_", " ").replace("-", " ").strip()
    return words[:1].upper() + words[1:] if words else name


def _link(path: Path, root: Path, base_url: str | None) -> str:
    if not base_url:
        return path.resolve().as_uri()
    relative = path.relative_to(root).as_posix() if path != root else path.name
    return f"{base_url.rstrip('/')}/{quote(os.fsencode(relative))}"


def _not_a_file(path: Path) -> str | None:
    """Why `path` is not a regular file we may open, or None when it is one.

    Decided from `stat`, before any open: opening a named pipe blocks until a writer comes, and a
    device (`/dev/zero`) never ends."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symlink loop"
        try:
            broken_link = path.is_symlink()
        except OSError:  # a folder this user may list but not enter: no lstat either
            broken_link = False
        if broken_link:
            return "broken symlink (its target does not exist)"
        return f"{_CANT_READ}: {exc.strerror or exc}"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return _FOLDER_LINK
    return f"not a regular file ({_FILE_KINDS.get(stat.S_IFMT(mode), 'special file')})"


def unsupported_type(suffix: str, name: str) -> str:
    """Why a file of that suffix (its name when it has none) is not read, with what to do
    when there is something (an old Word file: save it as .docx)."""
    shown = f"unsupported file type '{suffix or name}'"
    hint = conversion(suffix)
    return f"{shown} ({hint})" if hint else shown


def conversion(suffix: str) -> str | None:
    """What makes a file of that suffix readable, for the formats people expect."""
    return _CONVERSIONS.get(suffix.lower())


def _file_item(path: Path, root: Path, base_url: str | None) -> SourceItem | Skipped:
    display = printable(str(path))
    fmt = EXTENSIONS.get(path.suffix.lower())
    if fmt is None:
        return Skipped(display, unsupported_type(printable(path.suffix), printable(path.name)))
    if (reason := _not_a_file(path)) is not None:
        return Skipped(display, reason)
    return SourceItem(
        doc_id=path.resolve().as_uri(),
        url=_link(path, root, base_url),
        display=display,
        fallback_title=title_from_name(printable(path.name)),
        path=path,
        fmt=fmt,
    )


def _add(found: Discovery, item: SourceItem | Skipped) -> None:
    if isinstance(item, SourceItem):
        found.items.append(item)
    else:
        found.skipped.append(item)


def _links_outside(path: Path, folder: Path) -> bool:
    """A symlink whose target is not under the folder being read (`/etc/passwd`, a private
    file beside the docs): ingesting the folder must not publish it. One naming a file of the
    folder is read as that file; a broken or looping one is skipped by `_file_item`."""
    if not path.is_symlink():
        return False
    try:
        return not path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):  # a loop: `_file_item` says so
        return False


def _walk(
    found: Discovery, folder: Path, base_url: str | None, takes: Callable[[str], bool]
) -> None:
    def unlistable(exc: OSError) -> None:
        found.skipped.append(
            Skipped(printable(str(exc.filename)), f"can't list: {exc.strerror or exc}")
        )
        found.unseen.append(Path(exc.filename).resolve().as_uri() + "/")

    for parent, dirs, files in os.walk(folder, onerror=unlistable):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            path = Path(parent) / name
            if name.startswith(".") or not takes(path.relative_to(folder).as_posix()):
                continue
            item = _file_item(path, folder, base_url)
            if isinstance(item, SourceItem) and _links_outside(path, folder):
                item = Skipped(item.display, _OUTSIDE_LINK)
            elif isinstance(item, Skipped) and item.reason.startswith(_CANT_READ):
                found.unseen.append(path.resolve().as_uri())  # not known to be gone: kept
            _add(found, item)
        for name in dirs:  # os.walk lists a symlink to a folder here but does not enter it
            if (link := Path(parent) / name).is_symlink():
                found.skipped.append(Skipped(printable(str(link)), _FOLDER_LINK))


def discover(
    targets: list[str], base_url: str | None, takes: Callable[[str], bool] = lambda _: True
) -> Discovery:
    """What `targets` name; in a folder, only the files whose path from it `takes` accepts."""
    found = Discovery(items=[], skipped=[], scopes=[])
    for target in targets:
        if is_url(target):
            if (problem := url_problem(target)) is not None:
                found.missing.append(Skipped(redact_url(target), problem))
                continue
            url = redact_url(urldefrag(target).url)
            title = title_from_name(urlparse(url).path)
            found.items.append(SourceItem(url, url, url, title, auth=userinfo(target)))
            found.scopes.append(url)
            continue
        if not target.strip():
            found.missing.append(Skipped(repr(target), "empty path (for this folder, say '.')"))
            continue
        path = Path(target)
        try:
            is_dir, is_file = path.is_dir(), path.is_file()
        except OSError as exc:  # a symlink loop as the target itself, a name too long, ...
            found.missing.append(Skipped(printable(target), f"can't read: {exc.strerror}"))
            continue
        if is_dir:
            found.scopes.append(path.resolve().as_uri() + "/")
            _walk(found, path, base_url, takes)
        elif is_file or path.is_symlink() or os.path.lexists(path):
            item = _file_item(path, path.parent, base_url)
            if isinstance(item, SourceItem):
                found.scopes.append(item.doc_id)
            _add(found, item)
        else:
            found.missing.append(Skipped(printable(target), "no such file, folder or URL"))
    return found


async def read_item(
    item: SourceItem,
    *,
    max_bytes: int,
    client: httpx.AsyncClient | None,
    deadline_s: float,
    credentials: Mapping[str, str] | None = None,
) -> tuple[bytes, DocumentFormat]:
    """The item's bytes and format; raises `UnreadableDocument` with the reason to report. A
    URL item with a `fmt` is read as that format; `credentials` go with it as `fetch_url`
    sends them."""
    if item.path is not None and item.fmt is not None:
        return await asyncio.to_thread(_read_file, item.path, max_bytes), item.fmt
    if client is None:
        raise UnreadableDocument("URLs need an HTTP client")
    try:
        async with asyncio.timeout(deadline_s):
            return await _fetch(item, max_bytes, client, credentials)
    except TimeoutError:
        raise UnreadableDocument(
            f"did not arrive whole within {deadline_s:g} s (ingest.url_deadline_s)"
        ) from None


def too_big(max_bytes: int) -> UnreadableDocument:
    return UnreadableDocument(f"over the limit of {max_bytes:,} bytes (ingest.max_file_bytes)")


def _read_file(path: Path, max_bytes: int) -> bytes:
    """At most `max_bytes` of a regular file, bounded by the bytes actually read (a file can grow
    after `stat`, and /proc files report size 0). O_NONBLOCK: a named pipe put in place since
    discovery opens at once instead of waiting for a writer, and is then refused by `fstat`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        with open(fd, "rb") as file:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                kind = _FILE_KINDS.get(stat.S_IFMT(mode), "special file")
                raise UnreadableDocument(f"not a regular file ({kind})")
            data = file.read(max_bytes + 1)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnreadableDocument("symlink loop") from None
        raise UnreadableDocument(f"can't read: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise too_big(max_bytes)
    return data


def _redirect_refused(start: FetchStart, target: httpx.URL) -> str | None:
    """Why a redirect from `start` (where the user's URL led) to `target` is not followed.

    Only http(s); never to a link-local address (where cloud metadata endpoints answer); and
    never from a public host into the machine's own networks (loopback, private). A target is
    judged here when it is an IP literal or `localhost` (names are not resolved here: the
    guard judges them when it connects); the start by the guard's judgement of its addresses,
    or where the guard has none (behind a proxy), the same way as the target."""
    if target.scheme not in ("http", "https"):
        return f"redirect to a {target.scheme or 'relative'}: URL refused"
    if _address(target.host, "is_link_local"):
        return f"redirect to a link-local address ({target.host}) refused"
    internal_start = start.internal
    if internal_start is None:
        internal_start = _address(start.host, "is_private")
    if _address(target.host, "is_private") and not internal_start:
        return f"redirect from a public host to an internal one ({target.host}) refused"
    return None


def _address(host: str, kind: str) -> bool:
    """Whether `host` is an IP literal of that kind (`is_private` covers loopback too)."""
    if host.lower() == "localhost":
        return kind == "is_private"
    address = _ip_literal(host)
    return address is not None and bool(getattr(address, kind))


def _ip_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address `host` names without a lookup, in every spelling the system's resolver
    takes as one: `2852039166`, `0xa9fea9fe` and `169.254.43518` are 169.254.169.254 to
    `getaddrinfo` (inet_aton's forms), and `::ffff:169.254.169.254` reaches it over IPv6 while
    Python calls it neither link-local nor private. None for a name."""
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(host)
    except ValueError:
        try:
            address = ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:  # not an address in any form: a name
            return None
    return as_judged(address)


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    """Scheme, host and port: a URL's credentials go to a redirect only when all three are
    unchanged (an https->http hop on the same host would send them in clear text)."""
    return url.scheme, url.host, url.port


async def _fetch(
    item: SourceItem,
    max_bytes: int,
    client: httpx.AsyncClient,
    credentials: Mapping[str, str] | None,
) -> tuple[bytes, DocumentFormat]:
    fetched = await fetch_url(
        item, max_bytes, client, credentials=credentials, known_format=item.fmt
    )
    assert fetched.fmt is not None  # without any_type, a body of no known format was refused
    return fetched.data, fetched.fmt


class AlreadySeen(Exception):
    """A redirect led to a URL the caller has (a crawl's page under another URL)."""


class NotModified(Exception):  # an outcome, not a failure
    """A conditional request's answer (HTTP 304): the copy the caller has is current."""


@dataclass(frozen=True, slots=True)
class Fetched:
    data: bytes
    fmt: DocumentFormat | None
    url: str  # where it came from, after redirects
    etag: str | None  # the validators a conditional request sends back next time
    last_modified: str | None


async def fetch_url(
    item: SourceItem,
    max_bytes: int,
    client: httpx.AsyncClient,
    *,
    any_type: bool = False,
    seen: Callable[[str], bool] | None = None,
    conditional: dict[str, str] | None = None,
    cut: bool = False,
    credentials: Mapping[str, str] | None = None,
    known_format: DocumentFormat | None = None,
) -> Fetched:
    """The body, its format and the URL it came from after redirects (each checked by
    `_redirect_refused`). `any_type`: a body of an unsupported type (a sitemap's XML) comes back
    with no format instead of being refused. `seen`: a redirect to a URL it says yes to raises
    `AlreadySeen` instead of being followed (nothing fetched twice). `conditional`: the
    If-None-Match / If-Modified-Since headers of a copy the caller has; a 304 raises
    `NotModified`. `cut`: a body over `max_bytes` comes back cut to it (robots.txt) instead of
    being refused. `credentials`: headers sent like the URL's own user and password, only
    while a redirect keeps scheme, host and port (Confluence's token, not for the media host
    its downloads redirect to). `known_format`: the format the caller knows the body to be (a
    Confluence attachment's file name), whatever Content-Type says."""
    url = httpx.URL(item.url)
    chain = {url}  # the URLs this fetch has requested
    try:
        # Its connections judged against where it started (address_guard), and its redirects.
        with fetching_from(url) as start:
            for _ in range(MAX_REDIRECTS + 1):
                if (problem := url_problem(str(url))) is not None:
                    raise UnreadableDocument(f"{problem} ({redact_url(str(url))})")
                same_origin = _origin(url) == _origin(httpx.URL(item.url))
                auth = item.auth if same_origin else None
                headers = {"Accept-Encoding": ACCEPT_ENCODING, **(conditional or {})}
                if same_origin and credentials:
                    headers.update(credentials)
                async with client.stream(
                    "GET", url, auth=auth, follow_redirects=False, headers=headers
                ) as response:
                    if response.status_code == HTTP_NOT_MODIFIED and conditional:
                        raise NotModified(str(url))
                    if response.is_redirect:
                        target = url.join(response.headers["location"])
                        if (refused := _redirect_refused(start, target)) is not None:
                            raise UnreadableDocument(refused)
                        # Back to a URL of this very chain (a loop, or a page that sets a cookie
                        # and sends the reader back): followed, as a plain fetch would, so a loop
                        # ends in "more than N redirects" instead of as a page read "elsewhere".
                        if seen is not None and target not in chain and seen(str(target)):
                            raise AlreadySeen(str(target))
                        url = target
                        chain.add(url)
                        continue
                    data, fmt = await _body(
                        response, max_bytes, url, any_type, cut=cut, known_format=known_format
                    )
                    return Fetched(
                        data,
                        fmt,
                        str(url),
                        response.headers.get("etag"),
                        response.headers.get("last-modified"),
                    )
    except (UnreadableDocument, AlreadySeen, NotModified):
        raise
    except Exception as exc:
        if (reason := fetch_failure(exc, client.timeout)) is None:
            raise
        failed = UnreachableDocument if _passing(exc) else UnreadableDocument
        raise failed(redact_urls_in(f"can't fetch {item.url}: {reason}")) from None
    raise UnreadableDocument(f"more than {MAX_REDIRECTS} redirects")


# Client-error statuses that say "not now" rather than "no such document".
_FOR_NOW = frozenset(
    {HTTPStatus.REQUEST_TIMEOUT, HTTPStatus.TOO_EARLY, HTTPStatus.TOO_MANY_REQUESTS}
)
# What one request may raise about its URL or its connection: the target's failure, never the
# run's. ValueError: a malformed Location; OverflowError: a port the socket layer refuses.
_FETCH_ERRORS = (httpx.HTTPError, httpx.InvalidURL, ValueError, OverflowError, OSError)
_TIMEOUT_PHASES: dict[type[httpx.TimeoutException], str] = {
    httpx.ConnectTimeout: "connect",
    httpx.ReadTimeout: "read",
    httpx.WriteTimeout: "write",
    httpx.PoolTimeout: "pool",
}


def fetch_failure(exc: BaseException, timeout: httpx.Timeout) -> str | None:
    """A readable reason for a failed request, or None when `exc` is not a request's failure
    (a bug, to let through). An `ExceptionGroup` (anyio's connect wraps errors in one) is read
    through to the errors inside it; an error without a message (httpx's timeouts have none)
    is described by its kind, a timeout with the limit it hit."""
    if isinstance(exc, BaseExceptionGroup):
        matched, rest = exc.split(_FETCH_ERRORS)
        if matched is None or rest is not None:
            return None
        leaves = _leaves(matched)
        return "; ".join(dict.fromkeys(r for e in leaves if (r := fetch_failure(e, timeout))))
    if not isinstance(exc, _FETCH_ERRORS):
        return None
    if isinstance(exc, httpx.TimeoutException):
        phase = _TIMEOUT_PHASES.get(type(exc))
        limit = getattr(timeout, phase, None) if phase else None
        if limit is not None:
            return f"{phase} timed out after {limit:g} s (ingest.url_timeout_s)"
    detail = str(exc).strip()
    return f"{type(exc).__name__}: {detail}" if detail else _words(type(exc).__name__)


def _passing(exc: BaseException) -> bool:
    """Whether a request's failure says nothing about the document (the network or the server
    failed), rather than about its URL (malformed, a port out of range)."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_passing(leaf) for leaf in _leaves(exc))
    if isinstance(exc.__cause__, AddressRefused):  # the guard's verdict on this URL's host
        return False
    return isinstance(exc, (httpx.TransportError, OSError))


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    found: list[BaseException] = []
    for exc in group.exceptions:
        found += _leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc]
    return found


def _words(name: str) -> str:
    """A class name as words: `RemoteProtocolError` -> "remote protocol error"."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).lower()


async def _body(
    response: httpx.Response,
    max_bytes: int,
    url: httpx.URL,
    any_type: bool = False,
    *,
    cut: bool = False,
    known_format: DocumentFormat | None = None,
) -> tuple[bytes, DocumentFormat | None]:
    """The decoded body, cut off as soon as it passes `max_bytes`: a gzip bomb, stacked or not,
    is stopped one byte past it (see `core.http_body`)."""
    if response.status_code >= HTTPStatus.BAD_REQUEST:
        status = response.status_code
        passing = status in _FOR_NOW or status >= HTTPStatus.INTERNAL_SERVER_ERROR
        failed = UnreachableDocument if passing else UnreadableDocument
        raise failed(f"HTTP {status} from {redact_url(str(url))}")
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes and not cut:
        raise too_big(max_bytes)
    try:
        body = await read_body(response, max_bytes, cut=cut)
    except BodyTooLarge:
        raise too_big(max_bytes) from None
    except UndecodableBody as exc:
        raise UnreadableDocument(str(exc)) from None
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    fmt = (
        known_format
        or CONTENT_TYPES.get(content_type)
        or EXTENSIONS.get(Path(url.path).suffix.lower())
    )
    if fmt is None and not any_type:
        raise UnreadableDocument(f"unsupported content type '{content_type or 'none'}'")
    if fmt is not None and fmt not in BINARY_FORMATS:
        body = _as_utf8(body, fmt, response.charset_encoding)
        if len(body) > max_bytes:  # a character of one byte may take three in UTF-8
            raise too_big(max_bytes)
    return body, fmt


def _as_utf8(body: bytes, fmt: DocumentFormat, charset: str | None) -> bytes:
    """A text body in UTF-8, which the parsers read. One that is UTF-8 already is kept as it
    is, whatever the server declares (a docs server left at ISO-8859-1 while its files are
    UTF-8 is common, and transcoding would garble every accent). Otherwise it is read in the
    charset its Content-Type declares, or for HTML the one the page declares (`<meta
    charset>`) or bs4 recognises: a page in windows-1252 was skipped as "not valid UTF-8",
    although the server said what it was. A charset nobody knows (`x-bogus`) leaves it to be
    skipped as not UTF-8."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        return body
    if charset is not None:
        try:
            return body.decode(charset).encode("utf-8")
        except (LookupError, UnicodeDecodeError):  # unknown, or not what it says: see below
            pass
    if fmt is DocumentFormat.HTML:
        from bs4 import UnicodeDammit

        text = UnicodeDammit(body, is_html=True).unicode_markup
        if text is not None:
            return text.encode("utf-8")
    return body
