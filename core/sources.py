"""Finding what to ingest (files, folders, URLs) and reading its bytes safely.

Each item gets two identities: `doc_id`, stable wherever the bot runs from (the file's absolute
URI or the page's URL), and `url`, the link a reader follows (the published location when a base
URL is known, else the file URI).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urldefrag, urlparse

import httpx

from core.document_formats import DocumentFormat, UnreadableDocument

EXTENSIONS: dict[str, DocumentFormat] = {
    ".md": DocumentFormat.MARKDOWN,
    ".markdown": DocumentFormat.MARKDOWN,
    ".mdx": DocumentFormat.MARKDOWN,
    ".html": DocumentFormat.HTML,
    ".htm": DocumentFormat.HTML,
    ".txt": DocumentFormat.TEXT,
    ".text": DocumentFormat.TEXT,
    ".rst": DocumentFormat.TEXT,
    ".pdf": DocumentFormat.PDF,
}
CONTENT_TYPES: dict[str, DocumentFormat] = {
    "text/html": DocumentFormat.HTML,
    "application/xhtml+xml": DocumentFormat.HTML,
    "text/markdown": DocumentFormat.MARKDOWN,
    "text/x-markdown": DocumentFormat.MARKDOWN,
    "text/plain": DocumentFormat.TEXT,
    "application/pdf": DocumentFormat.PDF,
}


@dataclass(frozen=True, slots=True)
class SourceItem:
    doc_id: str
    url: str
    display: str
    fallback_title: str
    path: Path | None = None
    fmt: DocumentFormat | None = None


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


def is_url(target: str) -> bool:
    return urlparse(target).scheme in ("http", "https")


def title_from_name(name: str) -> str:
    words = Path(name).stem.replace("_", " ").replace("-", " ").strip()
    return words[:1].upper() + words[1:] if words else name


def _link(path: Path, root: Path, base_url: str | None) -> str:
    if not base_url:
        return path.resolve().as_uri()
    relative = path.relative_to(root).as_posix() if path != root else path.name
    return f"{base_url.rstrip('/')}/{quote(relative)}"


def _file_item(path: Path, root: Path, base_url: str | None) -> SourceItem | Skipped:
    fmt = EXTENSIONS.get(path.suffix.lower())
    if fmt is None:
        return Skipped(str(path), f"unsupported file type '{path.suffix or path.name}'")
    return SourceItem(
        doc_id=path.resolve().as_uri(),
        url=_link(path, root, base_url),
        display=str(path),
        fallback_title=title_from_name(path.name),
        path=path,
        fmt=fmt,
    )


def discover(targets: list[str], base_url: str | None) -> Discovery:
    found = Discovery(items=[], skipped=[], scopes=[])
    for target in targets:
        if is_url(target):
            url = urldefrag(target).url
            found.items.append(SourceItem(url, url, url, title_from_name(urlparse(url).path)))
            found.scopes.append(url)
            continue
        path = Path(target)
        if path.is_dir():
            found.scopes.append(path.resolve().as_uri() + "/")
            for folder, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(files):
                    if not name.startswith("."):
                        item = _file_item(Path(folder) / name, path, base_url)
                        bucket = found.items if isinstance(item, SourceItem) else found.skipped
                        bucket.append(item)  # type: ignore[arg-type]
        elif path.is_file():
            found.scopes.append(path.resolve().as_uri())
            item = _file_item(path, path.parent, base_url)
            (found.items if isinstance(item, SourceItem) else found.skipped).append(item)  # type: ignore[arg-type]
        else:
            found.skipped.append(Skipped(target, "no such file, folder or URL"))
    return found


async def read_item(
    item: SourceItem, *, max_bytes: int, client: httpx.AsyncClient | None
) -> tuple[bytes, DocumentFormat]:
    """The item's bytes and format; raises `UnreadableDocument` with the reason to report."""
    if item.path is not None and item.fmt is not None:
        return await asyncio.to_thread(_read_file, item.path, max_bytes), item.fmt
    if client is None:
        raise UnreadableDocument("URLs need an HTTP client")
    return await _fetch(item.url, max_bytes, client)


def _too_big(size: int, max_bytes: int) -> UnreadableDocument:
    return UnreadableDocument(
        f"{size:,} bytes is over the limit of {max_bytes:,} (ingest.max_file_bytes)"
    )


def _read_file(path: Path, max_bytes: int) -> bytes:
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise _too_big(size, max_bytes)
        return path.read_bytes()
    except OSError as exc:
        raise UnreadableDocument(f"can't read: {exc.strerror or exc}") from None


async def _fetch(
    url: str, max_bytes: int, client: httpx.AsyncClient
) -> tuple[bytes, DocumentFormat]:
    try:
        async with client.stream("GET", url) as response:
            if response.status_code >= 400:
                raise UnreadableDocument(f"HTTP {response.status_code} from {url}")
            declared = int(response.headers.get("content-length") or 0)
            if declared > max_bytes:
                raise _too_big(declared, max_bytes)
            body = bytearray()
            async for block in response.aiter_bytes():
                body.extend(block)
                if len(body) > max_bytes:
                    raise _too_big(len(body), max_bytes)
            content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    except httpx.HTTPError as exc:
        raise UnreadableDocument(f"can't fetch {url}: {exc.__class__.__name__}: {exc}") from None
    fmt = CONTENT_TYPES.get(content_type) or EXTENSIONS.get(Path(urlparse(url).path).suffix.lower())
    if fmt is None:
        raise UnreadableDocument(f"unsupported content type '{content_type or 'none'}'")
    return bytes(body), fmt
