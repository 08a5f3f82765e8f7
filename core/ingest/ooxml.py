"""What Office's zip-packaged files (.docx, .pptx, .xlsx) share as hostile input, and as
content.

Each is a zip archive of XML: a small file can declare gigabytes of XML, so what it unpacks to is
judged before anything is unpacked, by the sizes its directory declares, which Python's zipfile
then holds every member to. A table's row is one line, its cells joined the same way in each.
A chart's title and a SmartArt graphic's text (Word and PowerPoint) are kept in parts of their
own: `Graphics` reads them.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterable, Iterator
from typing import Any

from lxml import etree

from core.errors import UnreadableDocument
from core.ingest.sections import Deadline

CELL_SEPARATOR = " | "
_DRAWING = "http://schemas.openxmlformats.org/drawingml/2006/main"
_DIAGRAM = "http://schemas.openxmlformats.org/drawingml/2006/diagram"
_RELATIONSHIPS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
MARKUP_COMPATIBILITY = "http://schemas.openxmlformats.org/markup-compatibility/2006"
_CHART = "http://schemas.openxmlformats.org/drawingml/2006/chart"
_CHART_REFERENCE = f"{{{_CHART}}}chart"
# Where a drawing names its chart's part or its SmartArt's data part, in document order:
# compiled once, with namespaces of our own (the libraries' elements answer `xpath` with their
# own prefix maps, which differ). A copy kept for older readers (`mc:Fallback`) is left out.
_GRAPHIC_PARTS = etree.XPath(
    ".//dgm:relIds[not(ancestor::mc:Fallback)]/@r:dm"
    " | .//c:chart[not(ancestor::mc:Fallback)]/@r:id",
    namespaces={"dgm": _DIAGRAM, "c": _CHART, "r": _RELATIONSHIPS, "mc": MARKUP_COMPATIBILITY},
)
# A diagram's points: its nodes and assistants (an org chart's) hold the text; the others (the
# document, connectors, layout points) hold none a reader sees. A point with no type is a node.
_NODE = "node"
_TEXT_POINTS = (_NODE, "asst")
# A paragraph; a run's text; a line break
_PARAGRAPH, _TEXT, _BREAK = f"{{{_DRAWING}}}p", f"{{{_DRAWING}}}t", f"{{{_DRAWING}}}br"
# As python-docx's and python-pptx's own: no entity is resolved, nothing fetched.
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, remove_comments=True)


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

    def lines(self, element: Any, part: Any) -> list[str]:
        """The text of the graphics under `element` (a slide's shape, a Word paragraph), in
        order: a chart's title; a line per paragraph of each SmartArt node, in the order its
        data lists them (the order they were written, mostly the reading order). `part` is the
        python-docx or python-pptx part holding `element`: its relationships lead to theirs."""
        lines: list[str] = []
        for rid in _GRAPHIC_PARTS(element):
            relationship = part.rels.get(str(rid))
            if relationship is None or relationship.is_external:
                continue  # a broken or outside reference: nothing inside the file to read
            target = relationship.target_part
            if str(target.partname) in self._read:
                continue
            self._read.add(str(target.partname))
            self._deadline.check()
            try:
                data = etree.fromstring(target.blob, _PARSER)
            except etree.XMLSyntaxError:
                continue
            chart = rid.getparent().tag == _CHART_REFERENCE
            lines.extend(_chart_title(data) if chart else _node_lines(data))
        return lines


def _chart_title(chart: Any) -> Iterator[str]:
    """A chart's title as written, or as its worksheet cell held it when saved."""
    for title in chart.iterfind(f"{{{_CHART}}}chart/{{{_CHART}}}title/{{{_CHART}}}tx"):
        written = ("".join(t.text or "" for t in p.iter(_TEXT)) for p in title.iter(_PARAGRAPH))
        cached = (value.text or "" for value in title.iter(f"{{{_CHART}}}v"))
        if text := " ".join(" ".join([*written, *cached]).split()):
            yield text


def _node_lines(data: Any) -> Iterator[str]:
    for point in data.iterfind(f"{{{_DIAGRAM}}}ptLst/{{{_DIAGRAM}}}pt"):
        if point.get("type", _NODE) not in _TEXT_POINTS:
            continue
        for paragraph in point.iterfind(f"{{{_DIAGRAM}}}t/{_PARAGRAPH}"):
            pieces = paragraph.iter(_TEXT, _BREAK)
            text = "".join((piece.text or "") if piece.tag == _TEXT else " " for piece in pieces)
            if text := " ".join(text.split()):
                yield text
