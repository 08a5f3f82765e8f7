"""The files attached to Confluence pages, as documents of their own.

One CQL search per space lists them (`type = attachment`, with each one's version and the page
it belongs to), on Cloud and Data Center alike: Cloud's v2 API lists attachments only per page
(a request per page, every sync) or for the whole site, and CQL search is the one listing both
flavours share. A file whose name says a format the parsers read (PDF, Word, PowerPoint, Excel,
Markdown, HTML, text, reStructuredText, AsciiDoc) becomes a document; any other (images,
archives, Office's older formats) is reported as skipped, for the pages read that sync.

The link a citation follows is the file's download path on the site itself
(`/download/attachments/{page id}/{file name}`), built from the ids rather than taken from the
listing: a hostile listing cannot point readers elsewhere, and a PDF opens at the cited page
(`#page=N`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote, urlencode

from core.ingest.formats import DocumentFormat
from core.ingest.sources import EXTENSIONS, conversion


@dataclass(frozen=True, slots=True)
class Attachment:
    attachment_id: str
    page_id: str  # the page it is attached to
    filename: str
    version: int
    size: int | None  # bytes, as listed (None: not said)
    url: str

    @property
    def suffix(self) -> str:
        return PurePosixPath(self.filename).suffix.lower()

    @property
    def fmt(self) -> DocumentFormat | None:
        """The format its name says; None for a type no parser reads."""
        return EXTENSIONS.get(self.suffix)

    @property
    def why_not_read(self) -> str:
        """Why a file of a type no parser reads is skipped, with what to do when there is
        something (an old Word file: save it as .docx)."""
        hint = conversion(self.suffix)
        said = f"{self.suffix}; {hint}" if hint else self.suffix or "no extension"
        return f"an attachment of a type not read ({said})"


def attachments_url(base: str, space_key: str, page_size: int) -> str:
    """The first page of a space's attachment listing. The key is quoted as a CQL string (a
    `"` or `\\` in it ends no string early)."""
    quoted = space_key.replace("\\", "\\\\").replace('"', '\\"')
    query = urlencode(
        {
            "cql": f'space = "{quoted}" AND type = attachment',
            "expand": "version,container",
            "limit": page_size,
        }
    )
    return f"{base}/rest/api/content/search?{query}"


def listed_attachment(result: dict[str, Any], base: str) -> Attachment | None:
    """One result of the listing; None when it lacks what a document needs (an id, a file
    name, the page it is on)."""
    attachment_id = _text(result.get("id"))
    filename = _text(result.get("title"))
    container = result.get("container")
    page_id = _text(container.get("id")) if isinstance(container, dict) else ""
    if not (attachment_id and filename and page_id):
        return None
    version = result.get("version")
    number = version.get("number") if isinstance(version, dict) else None
    extensions = result.get("extensions")
    size = extensions.get("fileSize") if isinstance(extensions, dict) else None
    return Attachment(
        attachment_id,
        page_id,
        filename,
        number if isinstance(number, int) else -1,
        size if isinstance(size, int) and not isinstance(size, bool) else None,
        f"{base}/download/attachments/{quote(page_id, safe='')}/{quote(filename, safe='')}",
    )


def _text(value: object) -> str:
    """An id or a name as the listing gives it: a string, or a number Data Center may send."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return ""
