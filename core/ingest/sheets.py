"""Excel workbooks (.xlsx) as sections, read with openpyxl: one section per visible sheet.

A sheet is read row by row, streamed (openpyxl's read-only mode), each row one line. Where the
sheet's first row is a header (two or more cells, all text), every row after it names its
columns, `Question: How do I ... | Answer: Run ...`: a passage cut from the middle of a long
sheet still says what each value is, which is what lets a search find it and a reader check it.
Formulas give the value Excel last computed (a file never opened in Excel has none: the cell
reads empty). What a sheet draws over its cells (text boxes, charts' titles, pictures'
descriptions: `sheet_drawings`) comes first in its section, as what says what the rows are for.
A cell's note follows its row, named by its column (`Note on Owner: ...`: `sheet_notes`).
A chart sheet (a chart alone on a sheet of its own) is a section too, of its chart's title.
Hidden sheets are left out, as Excel shows them to no reader (a chart sheet's state is read
from the workbook: openpyxl forgets it).

An .xlsx is a zip archive, judged before it is unpacked (`ooxml`); openpyxl parses its XML
through defusedxml, which refuses entity declarations, and the drawings and the workbook's
listing are parsed as the other Office formats' parts are, no entity expanded. The size a
sheet declares is not trusted: rows are padded only to their own last cell, not to a declared
16,384 columns.
"""

from __future__ import annotations

import datetime as dt
import io
import re
import zipfile
from collections import defaultdict, deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from lxml import etree

from core.errors import UnreadableDocument
from core.ingest.ooxml import CELL_SEPARATOR, ZipPackage, check_unpacked, row_line
from core.ingest.sections import Deadline, ParsedDocument, ParseLimits, Section, tidy_text
from core.ingest.sheet_drawings import SheetDrawings
from core.ingest.sheet_notes import Notes, SheetNotes, cell_name

_VISIBLE = "visible"
_WORKBOOK = "/officeDocument"  # how the package's relationship to its workbook part ends
_LISTED_SHEETS = etree.XPath(
    "/s:workbook/s:sheets/s:sheet",
    namespaces={"s": "http://schemas.openxmlformats.org/spreadsheetml/2006/main"},
)
_RELATIONSHIP_ID = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"
# A percentage format's digits (`0%`, `0.0%`, `#,##0.00%`): the decimals it shows
_PERCENT = re.compile(r"0(?:\.(0+))?%")
_MAX_DECIMALS = 15  # as many as Excel shows of a number (a hostile format may ask a million)
_MIN_HEADER_CELLS = 2  # a single text cell on top is more often a caption than a header


def parse_sheets(data: bytes, fallback_title: str, limits: ParseLimits) -> ParsedDocument:
    """Sections in sheet order, each headed by the sheet's name; the title from the
    workbook's properties, else `fallback_title`. Past `limits.timeout_s` it stops between
    rows, with the file skipped."""
    from openpyxl import load_workbook
    from openpyxl.chartsheet import Chartsheet

    check_unpacked(data, limits.max_unpacked_bytes)
    deadline = Deadline(limits.timeout_s)
    try:
        book = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except ValueError as exc:
        # openpyxl hides the XML parser's error (defusedxml's refusal among them) behind a
        # paragraph of its own, the same for every cause: the skip reason is the cause.
        if isinstance(exc.__context__, Exception):
            raise exc.__context__ from None
        raise
    try:
        doc = ParsedDocument(title=(book.properties.title or "").strip() or fallback_title)
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            package = ZipPackage(archive)
            listing = _listing(package)
            drawings = SheetDrawings(package, deadline)
            notes = SheetNotes(package, deadline)
            for name, sheet in _in_order(book):
                deadline.check()  # a workbook may list a hundred thousand empty sheets
                hidden = isinstance(sheet, Chartsheet) and name in listing.hidden
                if sheet.sheet_state != _VISIBLE or hidden:
                    continue
                part = listing.parts.get(name)
                drawn = drawings.lines(part) if part else []
                if isinstance(sheet, Chartsheet):
                    rows: list[str] = []
                else:
                    sheet.reset_dimensions()  # see the module's docstring
                    noted = notes.of(part) if part else {}
                    rows = list(_lines(sheet.iter_rows(), noted, deadline))
                if text := tidy_text("\n".join([*drawn, *rows])):
                    doc.sections.append(Section(heading=name, anchor=None, text=text))
    finally:
        book.close()  # read-only mode keeps the archive open until closed
    if not doc.sections:
        raise UnreadableDocument("no text")
    return doc


def _in_order(book: Any) -> Iterator[tuple[str, Any]]:
    """The workbook's sheets and chart sheets in its order, each once: looking each name up
    (`book[name]`) searches every sheet, and finds only the first of two that share a name."""
    by_name: dict[str, deque[Any]] = defaultdict(deque)
    for sheet in [*book.worksheets, *book.chartsheets]:
        by_name[sheet.title].append(sheet)
    for name in book.sheetnames:
        if by_name[name]:
            yield name, by_name[name].popleft()


@dataclass(frozen=True, slots=True)
class _Listing:
    """The sheets as the workbook lists them, where openpyxl's streaming mode says too little:
    it keeps no public name for a sheet's part, and forgets that a chart sheet is hidden."""

    parts: dict[str, str] = field(default_factory=dict)  # a sheet's name -> its part
    hidden: set[str] = field(default_factory=set)  # read for chart sheets only


def _listing(package: ZipPackage) -> _Listing:
    """The listing of the package's workbook: the first it names (a package names one; a
    hostile one may name a hundred thousand, each to be parsed)."""
    listing = _Listing()
    for workbook in package.related("", _WORKBOOK)[:1]:
        listed = package.parsed(workbook)
        related = package.relationships(workbook)
        for sheet in _LISTED_SHEETS(listed) if listed is not None else ():
            name, rid = sheet.get("name"), sheet.get(_RELATIONSHIP_ID)
            if name and rid in related:
                listing.parts[name] = related[rid][1]
            if name and sheet.get("state", _VISIBLE) != _VISIBLE:
                listing.hidden.add(name)
    return listing


def _lines(rows: Iterator[Sequence[Any]], notes: Notes, deadline: Deadline) -> Iterator[str]:
    """Each row's line, from openpyxl's cells (its value and its number format), then its
    cells' notes; the notes of rows past the last come last. openpyxl gives a row missing
    from the file as an empty one, so a row's place is its number."""
    header: list[str] | None = None
    for number, row in enumerate(rows, start=1):
        deadline.check()
        values = [cell.value for cell in row]
        cells = [_text(cell.value, cell.number_format) for cell in row]
        if any(cells):
            heading = header is None and _is_header(values)
            if header is None:
                header = cells if heading else []
            if not heading:
                yield _named(header, cells) if header else row_line(cells)
        yield from _noted(notes.pop(number, []), number, header)
    for number in sorted(notes):
        yield from _noted(notes[number], number, header)


def _noted(notes: list[tuple[int, str]], row: int, header: list[str] | None) -> Iterator[str]:
    """A row's notes, each named by its cell's column (as its values are), or by the cell."""
    for column, text in notes:
        named = header[column - 1] if header and column <= len(header) else ""
        yield f"Note on {named or cell_name(row, column)}: {text}"


def _is_header(values: Sequence[object]) -> bool:
    """Two or more cells, all text: a number or a date is data, not a column's name."""
    filled = [value for value in values if value is not None and value != ""]
    return len(filled) >= _MIN_HEADER_CELLS and all(isinstance(v, str) for v in filled)


def _named(header: Sequence[str], cells: Sequence[str]) -> str:
    parts = []
    for n, cell in enumerate(cells):
        if cell:
            name = header[n] if n < len(header) else ""
            parts.append(f"{name}: {cell}" if name else cell)
    return CELL_SEPARATOR.join(parts)


def _text(value: object, number_format: str | None) -> str:
    """A cell as a reader sees it: whole numbers without `.0`, dates without a midnight, and
    a percentage as Excel shows it (`15%`, not the 0.15 stored: an answer quoting a sheet
    must say what its reader sees there)."""
    if value is None:
        return ""
    percent = _PERCENT.search(number_format or "")
    if percent and isinstance(value, int | float) and not isinstance(value, bool):
        decimals = min(len(percent[1] or ""), _MAX_DECIMALS)
        return f"{value * 100:.{decimals}f}%"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dt.datetime) and value.time() == dt.time():
        return value.date().isoformat()
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return " ".join(str(value).split())
