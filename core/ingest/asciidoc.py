"""AsciiDoc to sections, read for its structure: the document title, section titles with the ids
Asciidoctor gives them, and the text between.

Why not a full processor: the one Python implementation (asciidoc-py 10.2) runs `sys::[...]`
macros and reads any `include::` path by default, and its safe mode fails on its own backend
configuration; a document is hostile input. Retrieval needs the headings, their anchors and the
text, which one linear pass over the lines gives with nothing executed or included: directives
are dropped, delimited blocks are kept as text (a `== ` line inside a listing is not a heading),
comment and passthrough blocks are dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from core.ingest.sections import ParsedDocument, Section, tidy_text

_HEADING = re.compile(r"(={1,6})[ \t]+(\S.*)")
_DOC_TITLE = re.compile(r"=[ \t]+(\S.*)")
_BLOCK_ANCHOR = re.compile(
    r"\[\[([A-Za-z_:][\w:.\-]*)(?:,[^\]]*)?\]\]|\[#([A-Za-z_:][\w:.\-]*)[^\]]*\]"
)
_INLINE_ANCHOR = re.compile(r"\[\[([A-Za-z_:][\w:.\-]*)(?:,[^\]]*)?\]\]")
_ATTRIBUTE_ENTRY = re.compile(r":(!?[\w-]+!?):(?:[ \t]+(.*))?")
_ATTRIBUTE_LIST = re.compile(r"\[[^\[\]]*\]")
# Preprocessor directives and block macros (include::, ifdef::, image::, sys:: ...): dropped.
_DIRECTIVE = re.compile(r"[a-z][\w-]*::[^\s\[]*\[[^\]]*\][ \t]*")
_DELIMITER = re.compile(r"(-{4,}|\.{4,}|={4,}|\*{4,}|_{4,}|\+{4,}|/{4,}|`{3,})")
_DROPPED_BLOCKS = ("/", "+")  # comment blocks, passthrough (raw markup) blocks
# Inline markup. Every pattern is linear in the line: a bracket scans to the next bracket, and a
# macro's name is looked for only in the word just before a bracket, once.
_BRACKETED = re.compile(r"\[([^\[\]]*)\]")
_MACRO_NAME = re.compile(r"\b(?:link|mailto|xref|image|footnote|kbd|btn|menu|pass|https?|ftp|irc):")
_XREF = re.compile(r"<<([^<>,]*)(?:,([^<>]*))?>>")
# Bold and monospace marks; underscores only at a word's edge (`snake_case` keeps its own).
_FORMATTING = re.compile(r"[*`]+|(?<!\w)_+|_+(?!\w)")
_INVALID_ID_CHARS = re.compile(
    r"<[^<>]+>|&(?:[a-z][a-z]+\d{0,2}|#\d{2,5}|#x[\da-f]{3,4});|[^ \w\-.]+"
)


@dataclass(slots=True)
class _Ids:
    """Asciidoctor's auto ids: `idprefix` + the title, lowercased, its invalid characters dropped
    and runs of space, dot and hyphen turned into one `idseparator`; repeats get `_2`, `_3`."""

    prefix: str = "_"
    separator: str = "_"
    seen: set[str] = field(default_factory=set)
    # The last suffix given to each base: a page of 40,000 headings of one title probed _2,
    # _3... from the start for each (quadratic: minutes); every suffix below it is taken.
    suffixes: dict[str, int] = field(default_factory=dict)

    def auto(self, title: str) -> str:
        base = _INVALID_ID_CHARS.sub("", title.lower())
        base = re.sub(r"[ .\-]+", self.separator or "", base).rstrip(self.separator or " ")
        base = self.prefix + base
        anchor, n = base, self.suffixes.get(base, 1)
        if n > 1:
            anchor = f"{base}{self.separator or '_'}{n}"
        while anchor in self.seen:
            n += 1
            anchor = f"{base}{self.separator or '_'}{n}"
        self.suffixes[base] = n
        self.seen.add(anchor)
        return anchor

    def explicit(self, anchor: str) -> str:
        self.seen.add(anchor)
        return anchor


def _macros(text: str) -> str:
    """`link:url[text]`, `https://host[text]`, `image:x.png[alt]`... as their text (or target)."""
    out: list[str] = []
    last = previous = 0
    for bracket in _BRACKETED.finditer(text):
        segment = text[previous : bracket.start()]
        previous = bracket.end()
        word = max(segment.rfind(" "), segment.rfind("\t")) + 1
        if (name := _MACRO_NAME.search(segment, word)) is None:
            continue
        start = bracket.start() - len(segment) + name.start()
        target = text[start + len(name.group()) : bracket.start()]
        out += [text[last:start], bracket.group(1) or target]
        last = bracket.end()
    return "".join([*out, text[last:]])


def plain_inline(text: str) -> str:
    text = _macros(text)
    text = _XREF.sub(lambda m: m.group(2) or m.group(1), text)
    return " ".join(_FORMATTING.sub("", text).split())


def parse_asciidoc(text: str, fallback_title: str) -> ParsedDocument:
    lines = text.splitlines()
    ids = _Ids()
    title, start = _header(lines, ids)
    doc = ParsedDocument(title=title or fallback_title)
    trail: list[tuple[int, str]] = []
    current = Section(heading="", anchor=None, text="")
    body: list[str] = []
    anchor: str | None = None
    block: str | None = None  # the delimiter of the block we are in

    def close() -> None:
        current.text = tidy_text("\n".join(body))
        if current.text:
            doc.sections.append(current)

    for line in lines[start:]:
        stripped = line.rstrip()
        if block is not None:
            if stripped == block:
                block = None
            elif block[0] not in _DROPPED_BLOCKS:
                body.append(stripped)
            continue
        if (delimiter := _DELIMITER.fullmatch(stripped)) and len(set(stripped)) == 1:
            block = delimiter.group(1)
            continue
        if stripped.startswith("//") or _DIRECTIVE.fullmatch(stripped):
            continue
        if _ATTRIBUTE_ENTRY.fullmatch(stripped):
            continue
        if found := _BLOCK_ANCHOR.fullmatch(stripped):
            anchor = found.group(1) or found.group(2)
            continue
        if _ATTRIBUTE_LIST.fullmatch(stripped):  # [source,python], [NOTE], [discrete]...
            continue
        if (heading := _HEADING.fullmatch(stripped)) and len(heading.group(1)) > 1:
            close()
            level = len(heading.group(1)) - 1
            raw, inline = _title_and_anchor(heading.group(2))
            anchor = inline or anchor
            name = plain_inline(raw)
            section_id = ids.explicit(anchor) if anchor else ids.auto(name)
            trail = [(lvl, h) for lvl, h in trail if lvl < level] + [(level, name)]
            current = Section(" › ".join(h for _, h in trail), section_id, "")
            body, anchor = [], None
            continue
        anchor = None if stripped else anchor
        body.append(plain_inline(stripped))
    close()
    return doc


def _title_and_anchor(raw: str) -> tuple[str, str | None]:
    """A section title without its closing `=` marks, and its `[[id]]` if it ends with one
    (string scans from the end, no regex search to backtrack on a long title)."""
    title = raw.rstrip()
    closed = title.rstrip("=")
    if closed != title and closed.endswith((" ", "\t")):
        title = closed.rstrip()
    start = title.rfind("[[") if title.endswith("]]") else -1
    if start >= 0 and (found := _INLINE_ANCHOR.fullmatch(title, start)):
        return title[:start].rstrip(), found.group(1)
    return title, None


def _header(lines: list[str], ids: _Ids) -> tuple[str | None, int]:
    """The document title and where the body starts; the header's `:idprefix:` and
    `:idseparator:` entries change the auto ids, as they do for Asciidoctor."""
    n = 0
    while n < len(lines) and (not lines[n].strip() or lines[n].startswith("//")):
        n += 1
    if n >= len(lines) or not (found := _DOC_TITLE.fullmatch(lines[n].rstrip())):
        return None, 0
    title = plain_inline(found.group(1).rstrip())
    n += 1
    while n < len(lines) and lines[n].strip():
        if entry := _ATTRIBUTE_ENTRY.fullmatch(lines[n].rstrip()):
            if entry.group(1) == "idprefix":
                ids.prefix = entry.group(2) or ""
            elif entry.group(1) == "idseparator":
                ids.separator = entry.group(2) or ""
        n += 1
    return title, n
