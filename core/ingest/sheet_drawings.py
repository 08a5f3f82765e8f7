"""What a worksheet draws over its cells: text boxes and shapes' text, charts' titles, SmartArt's
text, and the descriptions given to pictures, shapes and charts (`image_text`). A sheet's
chart title or callout often says what its numbers are for, which no cell does.

openpyxl's streaming mode reads no drawing, so each sheet's drawing part is read straight from
the archive (`ooxml.ZipPackage`), with the parser the other Office formats use. The drawings
come in the order a reader meets them, top to bottom and left to right by the cell each is
anchored at (the part lists them in the order they are stacked); what Excel does not show (a
hidden drawing, a form control) is left out. Each drawing part is read once per file, however
many sheets name it, with the file's parse deadline checked before it and before each drawing;
one that is missing, damaged or not XML loses only its own text.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from lxml import etree

from core.ingest.image_text import image_words
from core.ingest.ooxml import MARKUP_COMPATIBILITY, Graphics, ZipPackage, paragraph_text
from core.ingest.sections import Deadline

_SPREADSHEET_DRAWING = "http://schemas.openxmlformats.org/drawingml/2006/spreadsheetDrawing"
_DRAWING_RELATIONSHIP = "/drawing"  # how a sheet's relationship to its drawing part ends
_NAMESPACES = {
    "xdr": _SPREADSHEET_DRAWING,
    "a": "http://schemas.openxmlformats.org/drawingml/2006/main",
    "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
    "mc": MARKUP_COMPATIBILITY,
}
# The drawings an anchor holds, groups' members in place: shapes and text boxes, pictures,
# charts and SmartArt, groups. Left out: a copy kept for older readers (`mc:Fallback`), and what
# Excel does not show: a drawing hidden (the Selection Pane's eye; form controls are written as
# hidden shapes too), or in a hidden group.
_DRAWN = etree.XPath(
    ".//*[(self::xdr:sp or self::xdr:pic or self::xdr:graphicFrame or self::xdr:grpSp)"
    " and not(ancestor::mc:Fallback)"
    " and not(ancestor-or-self::*[./*[1]/xdr:cNvPr[@hidden='1' or @hidden='true']])]",
    namespaces=_NAMESPACES,
)
_DESCRIPTION = etree.XPath("./*[1]/xdr:cNvPr/@descr", namespaces=_NAMESPACES)
_SHAPE_PARAGRAPHS = etree.XPath("./xdr:txBody/a:p", namespaces=_NAMESPACES)
_SHAPE = f"{{{_SPREADSHEET_DRAWING}}}sp"
_FRAME = f"{{{_SPREADSHEET_DRAWING}}}graphicFrame"
_CELL = f"{{{_SPREADSHEET_DRAWING}}}from"  # where a one- or two-cell anchor starts
_ROW, _COLUMN = f"{{{_SPREADSHEET_DRAWING}}}row", f"{{{_SPREADSHEET_DRAWING}}}col"
_PLACED, _UNPLACED = 0, 1  # an anchor at no cell (absolute) comes after the others


class SheetDrawings:
    """The drawings of one workbook's sheets, read from its archive."""

    def __init__(self, package: ZipPackage, deadline: Deadline) -> None:
        self._package = package
        self._deadline = deadline
        self._graphics = Graphics(deadline)

    def lines(self, sheet_part: str) -> list[str]:
        """The text drawn over the sheet stored as `sheet_part` (`xl/worksheets/sheet1.xml`),
        in reading order. The drawing is found by the sheet's relationships, not its XML,
        which openpyxl streams: parsing it whole would hold a long sheet in memory at once."""
        lines: list[str] = []
        for name in self._package.unread(sheet_part, _DRAWING_RELATIONSHIP):
            self._deadline.check()
            drawing = self._package.parsed(name)
            if drawing is not None:
                lines.extend(self._drawing_lines(drawing, name))
        return lines

    def _drawing_lines(self, drawing: Any, name: str) -> Iterator[str]:
        relations = self._package.relations(name)
        # Elements only: a processing instruction or an entity among them anchors nothing.
        for anchor in sorted(drawing.iterchildren(etree.Element), key=_cell_of):
            for drawn in _DRAWN(anchor):
                self._deadline.check()
                if drawn.tag == _SHAPE:
                    yield from filter(None, map(paragraph_text, _SHAPE_PARAGRAPHS(drawn)))
                elif drawn.tag == _FRAME:
                    yield from self._graphics.lines(drawn, relations)
                for described in _DESCRIPTION(drawn):
                    if words := image_words(str(described)):
                        yield words


def _cell_of(anchor: Any) -> tuple[int, int, int]:
    """The row and column an anchor starts at, to sort drawings as they are read."""
    start = anchor.find(f".//{_CELL}")  # the anchor's own, or inside `mc:AlternateContent`
    if start is None:
        return _UNPLACED, 0, 0
    try:  # a hostile file's row may be anything: no number, a superscript, 5,000 digits
        return _PLACED, int(start.findtext(_ROW) or ""), int(start.findtext(_COLUMN) or "")
    except ValueError:
        return _UNPLACED, 0, 0
