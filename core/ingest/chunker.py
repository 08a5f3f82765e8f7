"""Splitting a section into passages small enough to embed whole and cite precisely.

Chunks never cross a heading (each keeps its section's anchor, so a citation lands on it). Within a
section we cut at paragraph boundaries, then sentences, then words, and never inside a fenced code
block unless the block alone is too big. Consecutive chunks overlap a little so a sentence that
straddles a cut is still findable from either side.
"""

from __future__ import annotations

import re

_SENTENCE_END = re.compile(r"(?<=[.!?。])\s+")
_FENCE = re.compile(r"^\s*(```|~~~)")


def _blocks(text: str) -> list[str]:
    """Paragraphs, with each fenced code block kept as one block."""
    blocks: list[str] = []
    fence: list[str] | None = None
    paragraph: list[str] = []
    for line in text.splitlines():
        if fence is not None:
            fence.append(line)
            if _FENCE.match(line):
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
    """A block as pieces of at most `size` characters: whole, else sentences (or lines of code),
    else words. Pieces cut from one over-long sentence leave room for the overlap."""
    if len(block) <= size:
        return [block]
    room = size - overlap
    parts = block.splitlines() if _FENCE.match(block) else _SENTENCE_END.split(block)
    units: list[str] = []
    for part in parts:
        # A sentence or line longer than a chunk is cut at words. The cuts move an offset along
        # the part instead of slicing off its rest each time: on a 20 MB single line, slicing
        # would copy the remainder once per chunk (quadratic).
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
    last_code = False
    for separator, unit, code in units:
        if not current:
            current = unit
        elif len(current) + len(separator) + len(unit) <= size:
            current = f"{current}{separator}{unit}"
        else:
            chunks.append(current)
            # Only prose overlaps prose: code's end carried over would open a fence where none
            # is (a lone closing fence), and words glued to a line of code would change it.
            carry = "" if code or last_code else _tail(current, overlap)
            current = f"{carry} {unit}" if carry and len(carry) + 1 + len(unit) <= size else unit
        last_code = code
    if current:
        chunks.append(current)
    return chunks
