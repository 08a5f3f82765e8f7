"""Splitting a section into passages small enough to embed whole and cite precisely.

Chunks never cross a heading (each keeps its section's anchor, so a citation lands on it). Within a
section we cut at paragraph boundaries, then sentences, then words, and never inside a fenced code
block unless the block alone is too big. Consecutive chunks overlap a little so a sentence that
straddles a cut is still findable from either side.
"""

from __future__ import annotations

import re

_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
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


def _pieces(block: str, size: int) -> list[str]:
    """A block cut to at most `size` characters: at sentences, else lines, else words."""
    if len(block) <= size:
        return [block]
    separator = "\n" if _FENCE.match(block) else " "
    units = block.splitlines() if separator == "\n" else _SENTENCE_END.split(block)
    pieces: list[str] = []
    current = ""
    for unit in units:
        while len(unit) > size:  # a single sentence or line longer than a chunk
            cut = unit.rfind(" ", 0, size)
            cut = cut if cut > size // 2 else size
            if current:
                pieces.append(current)
                current = ""
            pieces.append(unit[:cut].rstrip())
            unit = unit[cut:].lstrip()
        if current and len(current) + len(separator) + len(unit) > size:
            pieces.append(current)
            current = unit
        else:
            current = f"{current}{separator}{unit}" if current else unit
    if current:
        pieces.append(current)
    return pieces


def _tail(text: str, overlap: int) -> str:
    """The end of a chunk to repeat at the start of the next, cut at a word boundary."""
    if overlap <= 0 or len(text) <= overlap:
        return ""
    tail = text[-overlap:]
    space = tail.find(" ")
    return tail[space + 1 :] if 0 <= space < len(tail) - 1 else ""


def split_text(text: str, size: int, overlap: int) -> list[str]:
    pieces = [p for block in _blocks(text) for p in _pieces(block, size)]
    chunks: list[str] = []
    current = ""
    for piece in pieces:
        if not current:
            current = piece
        elif len(current) + 2 + len(piece) <= size:
            current = f"{current}\n\n{piece}"
        else:
            chunks.append(current)
            carry = "" if _FENCE.match(piece) else _tail(current, overlap)
            joined = f"{carry} {piece}" if carry else piece
            current = joined if len(joined) <= size else piece
    if current:
        chunks.append(current)
    return chunks
