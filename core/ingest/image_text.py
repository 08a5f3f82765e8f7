"""What an image says in words: the alt text its author wrote (HTML, Confluence) or the
description given it (Word, PowerPoint), read in the image's place, as a screen reader says it.
A diagram's description is often the only place its point is written down; Markdown's
`![alt](...)` already stays in the text, and the other formats now match it.

Left out, as saying nothing anyone asks the docs about: no text or empty text (WCAG's mark of
a decorative image), a file's name or path, and the captions Office generates by itself ("A
screenshot of a computer. Description automatically generated")."""

from __future__ import annotations

import re

# A file's name, or its path without spaces (`/img/flow.svg`, `C:\Users\me\diagram.png`); a
# sentence that names one ("see /img/flow.svg") is a description.
_FILE_NAME = re.compile(
    r"(?:\S*[/\\])?[^\s/\\]+\.(?:png|jpe?g|gif|svg|webp|bmp|tiff?|emf|wmf)", re.IGNORECASE
)
_GENERATED = re.compile(
    r"description automatically generated|ai-generated content may be incorrect", re.IGNORECASE
)


def image_words(described: str | None) -> str:
    """The image's text on one line, or "" when it says nothing worth indexing."""
    words = " ".join((described or "").split())
    if not words or _FILE_NAME.fullmatch(words) or _GENERATED.search(words):
        return ""
    return words
