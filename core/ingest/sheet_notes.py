"""A worksheet's notes: what its author wrote on a cell for whoever reads it ("the team paged
first", "retired in Q3"), shown when the pointer rests on the cell. openpyxl's streaming mode
reads none, so they are read from the sheet's comments part (`ooxml.ZipPackage`), each to be
placed after its cell's row. Each notes part is read once per file, with the file's parse
deadline checked before each note.

Left out: the author's name Excel writes in bold at the start of a note, and threaded comments
(Excel 365's discussions, "@Sam can you check?"), which the part keeps only as a copy marked
"[Threaded comment]": a discussion about the sheet, as Word's comments are, not part of it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from core.ingest.ooxml import ZipPackage
from core.ingest.sections import Deadline

_MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_COMMENTS_RELATIONSHIP = "/comments"  # how a sheet's relationship to its notes ends
_COMMENT = f"{{{_MAIN}}}comment"
_TEXT, _RUN, _RUN_PROPERTIES = f"{{{_MAIN}}}text", f"{{{_MAIN}}}r", f"{{{_MAIN}}}rPr"
_PIECE, _BOLD = f"{{{_MAIN}}}t", f"{{{_MAIN}}}b"
_THREADED = "[Threaded comment]"
# A cell reference, `B7` or `$B$7`: Excel's columns run to XFD (three letters)
_REFERENCE = re.compile(r"\$?([A-Z]{1,3})\$?([1-9][0-9]{0,6})")
_LETTERS = 26  # a column's letters count in base 26 (A = 1, Z = 26, AA = 27)
_AUTHOR_END = ":"

# A row's number -> its notes, each with its cell's column number, in the part's order
Notes = dict[int, list[tuple[int, str]]]


class SheetNotes:
    """The notes of one workbook's sheets, read from its archive: each notes part once,
    however many sheets name it."""

    def __init__(self, package: ZipPackage, deadline: Deadline) -> None:
        self._package = package
        self._deadline = deadline

    def of(self, sheet_part: str) -> Notes:
        """The notes of the sheet stored as `sheet_part`, by row. A notes part that is
        missing, damaged or not XML has none; a note on no valid cell is left out."""
        notes: Notes = defaultdict(list)
        for name in self._package.unread(sheet_part, _COMMENTS_RELATIONSHIP)[:1]:  # one
            listed = self._package.parsed(name)
            for comment in () if listed is None else listed.iter(_COMMENT):
                self._deadline.check()
                cell = _cell(comment.get("ref") or "")
                text = _note_text(comment)
                if cell is not None and text and not text.startswith(_THREADED):
                    notes[cell[0]].append((cell[1], text))
        return notes


def _cell(ref: str) -> tuple[int, int] | None:
    """A cell reference's row and column numbers (`B7`: 7, 2); None for anything else."""
    found = _REFERENCE.fullmatch(ref)
    if found is None:
        return None
    column = 0
    for letter in found[1]:
        column = column * _LETTERS + ord(letter) - ord("A") + 1
    return int(found[2]), column


def cell_name(row: int, column: int) -> str:
    """`B7` for row 7, column 2."""
    letters = ""
    while column:
        column, letter = divmod(column - 1, _LETTERS)
        letters = chr(ord("A") + letter) + letters
    return f"{letters}{row}"


def _note_text(comment: Any) -> str:
    """The note on one line, without the author's name Excel writes in bold before it."""
    text = comment.find(_TEXT)
    if text is None:
        return ""
    runs = text.findall(_RUN)
    if not runs:  # plain text (a phonetic guide's `t`s are deeper, and left out)
        return " ".join("".join(t.text or "" for t in text.findall(_PIECE)).split())
    pieces = ["".join(t.text or "" for t in run.findall(_PIECE)) for run in runs]
    if pieces[0].strip().endswith(_AUTHOR_END) and _bold(runs[0]):
        pieces = pieces[1:]
    return " ".join("".join(pieces).split())


def _bold(run: Any) -> bool:
    properties = run.find(_RUN_PROPERTIES)
    return properties is not None and properties.find(_BOLD) is not None
