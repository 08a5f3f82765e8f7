"""Splitting a section into passages small enough to embed whole and cite precisely.

Chunks never cross a heading (each keeps its section's anchor, so a citation lands on it). Within a
section we cut at paragraph boundaries, then sentences, then words, and never inside a fenced code
block unless the block alone is too big (then each piece is fenced as the block is). Consecutive
chunks of prose overlap a little so a sentence that straddles a cut is still findable from either
side; code overlaps nothing.
"""

from __future__ import annotations

import re

_SENTENCE_END = re.compile(r"(?<=[.!?。])\s+")
# A line that opens a code block, and its whole run of fence characters: what closes it again.
_FENCE = re.compile(r"\s*(`{3,}|~{3,})")


def _closes(opener: str, line: str) -> bool:
    """Whether `line` closes the code block `opener` opened, as CommonMark reads it: the same
    fence character, at least as many, and nothing after them. A `~~~` line (an underline in
    the code) or a shorter run (a block about Markdown) is code."""
    opened, closing = _FENCE.match(opener), _FENCE.match(line)
    if opened is None or closing is None or line[closing.end() :].strip():
        return False
    mark, run = opened.group(1), closing.group(1)
    return run[0] == mark[0] and len(run) >= len(mark)


def _blocks(text: str) -> list[str]:
    """Paragraphs, with each fenced code block kept as one block."""
    blocks: list[str] = []
    fence: list[str] | None = None
    paragraph: list[str] = []
    for line in text.splitlines():
        if fence is not None:
            fence.append(line)
            if _closes(fence[0], line):
                blocks.append("\n".join(fence))
                fence = None
            continue
        if _FENCE.match(line):
            if paragraph:
                blocks.append("\n".join(paragraph))
                paragraph = []
            fence = [line]
        elif line.strip():
            paragraph.append(line)
        elif paragraph:
            blocks.append("\n".join(paragraph))
            paragraph = []
    if fence is not None:
        paragraph = fence + paragraph
    if paragraph:
        blocks.append("\n".join(paragraph))
    return [b for b in blocks if b.strip()]


def _units(block: str, size: int, overlap: int) -> list[str]:
    """A block as pieces of at most `size` characters: whole, else sentences (or, for code,
    fenced pieces of its lines), else words. Pieces cut from one over-long sentence leave room
    for the overlap."""
    if len(block) <= size:
        return [block]
    if _FENCE.match(block) and (pieces := _code_pieces(block, size)) is not None:
        return pieces
    room = size - overlap
    parts = block.splitlines() if _FENCE.match(block) else _SENTENCE_END.split(block)
    return [unit for part in parts for unit in _cut(part, room)]


def _code_pieces(block: str, size: int) -> list[str] | None:
    """An over-long code block as blocks of its lines, each fenced as the whole one is: a
    passage from its middle is still code to the renderers (no Markdown read into it), to the
    model and to a quote's link. None when its opening line leaves too little room to repeat."""
    lines = block.splitlines()
    opener, inner = lines[0], lines[1:]
    if inner and _closes(opener, inner[-1]):
        inner.pop()
    fence = _FENCE.match(opener)
    closer = fence.group(1) if fence else "```"
    room = size - len(opener) - len(closer) - 2  # the two fence lines and their line breaks
    if room < size // 2:
        return None
    pieces: list[list[str]] = []
    length = 0
    for line in (cut for whole in inner for cut in _cut(whole, room) or [""]):
        if pieces and length + 1 + len(line) <= room:
            pieces[-1].append(line)
            length += 1 + len(line)
        else:
            pieces.append([line])
            length = len(line)
    return ["\n".join([opener, *piece, closer]) for piece in pieces]


def _cut(part: str, room: int) -> list[str]:
    """A sentence or line as it is, or cut at words when longer than `room`. The cuts move an
    offset along it instead of slicing off its rest each time: on a 20 MB single line, slicing
    would copy the remainder once per cut (quadratic)."""
    units: list[str] = []
    start, end = 0, len(part)
    while end - start > room:
        cut = part.rfind(" ", start, start + room)
        cut = cut if cut > start + room // 2 else start + room
        units.append(part[start:cut].rstrip())
        start = cut
        while start < end and part[start].isspace():
            start += 1
    if start < end:
        units.append(part[start:])
    return units


def _tail(text: str, overlap: int) -> str:
    """The end of a chunk to repeat at the start of the next, cut at a word boundary."""
    if overlap <= 0 or len(text) <= overlap:
        return ""
    tail = text[-overlap:]
    space = tail.find(" ")
    return tail[space + 1 :] if 0 <= space < len(tail) - 1 else ""


def split_text(text: str, size: int, overlap: int) -> list[str]:
    """Greedy packing of units into chunks; each new chunk starts with the previous one's end."""
    units: list[tuple[str, str, bool]] = []  # (separator before it, text, is it code)
    for block in _blocks(text):
        code = _FENCE.match(block) is not None
        separator = "\n" if code else " "
        for n, unit in enumerate(_units(block, size, overlap)):
            units.append(("\n\n" if n == 0 else separator, unit, code))
    chunks: list[str] = []
    current = ""
    prose = 0  # where the prose that ends `current` starts: what may overlap the next chunk
    for separator, unit, code in units:
        if not current:
            current = unit
        elif len(current) + len(separator) + len(unit) <= size:
            current = f"{current}{separator}{unit}"
        else:
            chunks.append(current)
            # Only prose overlaps prose: code's end carried over would open a fence where none
            # is (a lone closing fence), and words glued to a line of code would change it.
            carry = "" if code else _tail(current[prose:], overlap)
            current = f"{carry} {unit}" if carry and len(carry) + 1 + len(unit) <= size else unit
            prose = 0
        if code:
            prose = len(current)
    if current:
        chunks.append(current)
    return chunks
