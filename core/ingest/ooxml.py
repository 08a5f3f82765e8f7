"""What Office's zip-packaged files (.docx, .pptx, .xlsx) share as hostile input, and as
content.

Each is a zip archive of XML: a small file can declare gigabytes of XML, so what it unpacks to is
judged before anything is unpacked, by the sizes its directory declares, which Python's zipfile
then holds every member to. A table's row is one line, its cells joined the same way in each.
A chart's title and a SmartArt graphic's text are kept in parts of their own: `Graphics` reads
them, through python-docx's and python-pptx's parts (`PartRelations`) or straight from the
archive (`ZipPackage`, for openpyxl, which reads no drawing in its streaming mode).
"""

from __future__ import annotations

import io
import posixpath
import zipfile
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from lxml import etree

from core.errors import UnreadableDocument
from core.ingest.sections import Deadline

CELL_SEPARATOR = " | "
_DRAWING = "http://schemas.openxmlformats.org/drawingml/2006/main"
_DIAGRAM = "http://schemas.openxmlformats.org/drawingml/2006/diagram"
_RELATIONSHIPS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
MARKUP_COMPATIBILITY = "http://schemas.openxmlformats.org/markup-compatibility/2006"
_CHART = "http://schemas.openxmlformats.org/drawingml/2006/chart"
# Office 2016's chart kinds (waterfall, histogram, treemap, funnel, ...) are charts of another
# schema, written beside a fallback for older readers (a shape saying the chart is unavailable).
_CHARTEX = "http://schemas.microsoft.com/office/drawing/2014/chartex"
_CHART_SCHEMAS = (_CHART, _CHARTEX)
_CHART_REFERENCES = tuple(f"{{{schema}}}chart" for schema in _CHART_SCHEMAS)
# Where a drawing names its chart's part or its SmartArt's data part, in document order:
# compiled once, with namespaces of our own (the libraries' elements answer `xpath` with their
# own prefix maps, which differ). A copy kept for older readers (`mc:Fallback`) is left out.
_GRAPHIC_PARTS = etree.XPath(
    ".//dgm:relIds[not(ancestor::mc:Fallback)]/@r:dm"
    " | .//c:chart[not(ancestor::mc:Fallback)]/@r:id"
    " | .//cx:chart[not(ancestor::mc:Fallback)]/@r:id",
    namespaces={
        "dgm": _DIAGRAM,
        "c": _CHART,
        "cx": _CHARTEX,
        "r": _RELATIONSHIPS,
        "mc": MARKUP_COMPATIBILITY,
    },
)
# A diagram's points: its nodes and assistants (an org chart's) hold the text; the others (the
# document, connectors, layout points) hold none a reader sees. A point with no type is a node.
_NODE = "node"
_TEXT_POINTS = (_NODE, "asst")
# A paragraph; a run's text; a line break
_PARAGRAPH, _TEXT, _BREAK = f"{{{_DRAWING}}}p", f"{{{_DRAWING}}}t", f"{{{_DRAWING}}}br"
# As python-docx's and python-pptx's own: no entity is resolved, nothing fetched.
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, remove_comments=True)
_RELATIONSHIP = "{http://schemas.openxmlformats.org/package/2006/relationships}Relationship"
_EXTERNAL = "External"  # a relationship's TargetMode when it points outside the file


class Relations(Protocol):
    """Where one part's relationships lead inside the file: a target part's name first, its
    bytes only when asked (a part named again is not read again)."""

    def target(self, rid: str) -> str | None:
        """The name of the part `rid` leads to; None for a broken or outside reference."""
        ...

    def blob(self, name: str) -> bytes | None:
        """The bytes of a part `target` named; None when they cannot be read."""
        ...


def check_unpacked(data: bytes, max_bytes: int) -> None:
    """Refuse an archive whose members declare more than `max_bytes` unpacked, in total."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        unpacked = sum(member.file_size for member in archive.infolist())
    if unpacked > max_bytes:
        raise UnreadableDocument(
            f"unpacks to {unpacked:,} bytes, over the limit of {max_bytes:,} "
            "(ingest.max_unpacked_bytes)"
        )


def row_line(cells: Iterable[str]) -> str:
    """A table row as one line: its non-empty cells, stripped, in order."""
    return CELL_SEPARATOR.join(text for cell in cells if (text := cell.strip()))


class Graphics:
    """The text of one file's charts and SmartArt graphics, each kept in a part of its own
    (which python-docx reads not at all, and python-pptx only through objects that would blank
    a title taken from a cell). Each part is read once, however many drawings name it (a copy
    for older readers, or a hostile file naming one part a million times), with the file's
    parse deadline checked before each. A part that is not XML loses that graphic's text, not
    the file's."""

    def __init__(self, deadline: Deadline) -> None:
        self._deadline = deadline
        self._read: set[str] = set()

    def lines(self, element: Any, relations: Relations) -> list[str]:
        """The text of the graphics under `element` (a slide's shape, a Word paragraph, a
        sheet's drawing), in order: a chart's title; a line per paragraph of each SmartArt
        node, in the order its data lists them (the order they were written, mostly the
        reading order). `relations` are those of the part holding `element`."""
        lines: list[str] = []
        for rid in _GRAPHIC_PARTS(element):
            name = relations.target(str(rid))
            if name is None or name in self._read:
                continue  # nothing inside the file to read, or read already
            self._read.add(name)
            self._deadline.check()
            blob = relations.blob(name)
            data = parsed(blob) if blob is not None else None
            if data is None:
                continue
            chart = rid.getparent().tag in _CHART_REFERENCES
            lines.extend(_chart_title(data) if chart else _node_lines(data))
        return lines


class PartRelations:
    """The relationships of a python-docx or python-pptx part."""

    def __init__(self, part: Any) -> None:
        self._part = part
        self._targets: dict[str, Any] = {}  # a target part by its name, once named

    def target(self, rid: str) -> str | None:
        relationship = self._part.rels.get(rid)
        if relationship is None or relationship.is_external:
            return None
        name = str(relationship.target_part.partname)
        self._targets[name] = relationship.target_part
        return name

    def blob(self, name: str) -> bytes | None:
        target = self._targets.get(name)
        return None if target is None else bytes(target.blob)


class _ZipRelations:
    def __init__(self, package: ZipPackage, targets: dict[str, str]) -> None:
        self._package = package
        self._targets = targets

    def target(self, rid: str) -> str | None:
        return self._targets.get(rid)

    def blob(self, name: str) -> bytes | None:
        return self._package.blob(name)


class ZipPackage:
    """An Office file's parts and relationships read straight from its archive, whose
    members' sizes `check_unpacked` has judged (zipfile holds each to its declared size)."""

    def __init__(self, archive: zipfile.ZipFile) -> None:
        self._archive = archive
        self._listed: dict[str, dict[str, tuple[str, str]]] = {}  # by source, parsed once
        self._given: set[str] = set()  # the parts `unread` has named

    def relations(self, source: str) -> Relations:
        """The relationships of the part named `source` (`xl/drawings/drawing1.xml`)."""
        targets = {rid: name for rid, (_, name) in self.relationships(source).items()}
        return _ZipRelations(self, targets)

    def related(self, source: str, kind: str) -> list[str]:
        """The parts the part named `source` relates to as `kind` (the end of a relationship
        type, `/drawing`, as transitional and strict files both end it), in the order listed."""
        return [name for how, name in self.relationships(source).values() if how.endswith(kind)]

    def unread(self, source: str, kind: str) -> list[str]:
        """The parts `related` names that no earlier call named: a part many sheets share (a
        hostile file's drawing or notes named ten thousand times) is read once per file."""
        fresh = list(dict.fromkeys(n for n in self.related(source, kind) if n not in self._given))
        self._given.update(fresh)
        return fresh

    def relationships(self, source: str) -> dict[str, tuple[str, str]]:
        """Id -> (type, target part's name) of the part's relationships inside the file (""
        names the package itself); a relationships part that is missing or not XML relates
        to nothing. Parsed once per source, however many sheets share it."""
        if source in self._listed:
            return self._listed[source]
        folder, name = posixpath.split(source)
        listed = self.parsed(posixpath.join(folder, "_rels", name + ".rels"))
        found: dict[str, tuple[str, str]] = {}
        for relationship in () if listed is None else listed.iter(_RELATIONSHIP):
            rid, how, where = (relationship.get(key) for key in ("Id", "Type", "Target"))
            if rid and how and where and relationship.get("TargetMode") != _EXTERNAL:
                # A target is relative to the source's folder, or from the archive's root.
                path = where[1:] if where.startswith("/") else posixpath.join(folder, where)
                found[rid] = (how, posixpath.normpath(path))
        self._listed[source] = found
        return found

    def parsed(self, name: str) -> Any:
        """The part named `name` parsed, or None when it is missing or not XML."""
        blob = self.blob(name)
        return None if blob is None else parsed(blob)

    def blob(self, name: str) -> bytes | None:
        """The member's bytes; None when there is none by that name, or it cannot be read,
        which loses that part, not the file."""
        try:
            return self._archive.read(name)
        except KeyError:
            return None
        except Exception:  # noqa: BLE001
            # zipfile raises a different error for each kind of damage: BadZipFile (a
            # checksum), zlib.error, LZMAError or OSError (a compressed stream), RuntimeError
            # (encrypted), NotImplementedError (an unknown compression method), EOFError.
            return None


def parsed(blob: bytes) -> Any:
    """A part's XML, parsed as python-docx and python-pptx parse theirs; None when it is not
    XML (a hostile part's entities are never expanded)."""
    try:
        return etree.fromstring(blob, _PARSER)
    except etree.XMLSyntaxError:
        return None


def paragraph_text(paragraph: Any) -> str:
    """A DrawingML paragraph (`a:p`) on one line, a line break as a space."""
    pieces = paragraph.iter(_TEXT, _BREAK)
    text = "".join((piece.text or "") if piece.tag == _TEXT else " " for piece in pieces)
    return " ".join(text.split())


def _chart_title(chart: Any) -> Iterator[str]:
    """A chart's title as written, or as its worksheet cell held it when saved (either
    schema: `c:` charts keep the cell's text in a cache, `cx:` ones in `txData`)."""
    for schema in _CHART_SCHEMAS:  # a part is of one: the other finds nothing
        for title in chart.iterfind(f"{{{schema}}}chart/{{{schema}}}title/{{{schema}}}tx"):
            paragraphs = title.iter(_PARAGRAPH)
            written = ("".join(t.text or "" for t in p.iter(_TEXT)) for p in paragraphs)
            cached = (value.text or "" for value in title.iter(f"{{{schema}}}v"))
            if text := " ".join(" ".join([*written, *cached]).split()):
                yield text


def _node_lines(data: Any) -> Iterator[str]:
    for point in data.iterfind(f"{{{_DIAGRAM}}}ptLst/{{{_DIAGRAM}}}pt"):
        if point.get("type", _NODE) not in _TEXT_POINTS:
            continue
        for paragraph in point.iterfind(f"{{{_DIAGRAM}}}t/{_PARAGRAPH}"):
            if text := paragraph_text(paragraph):
                yield text
