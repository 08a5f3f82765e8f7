"""Catching a streamed reply that has degenerated into repeating itself.

Small models loop: the same lines again and again until the token limit (a recorded local model
wrote 1,226 tokens of repeated lines in 166 s), or the same sentence back to back. Reading on
costs the user minutes for nothing, so the reply is cut where the loop began and the stream is
closed, which also stops the server generating. A model echoing the prompt's own markup
(`<source id=...>`) has left the answer too.
"""

from __future__ import annotations

import re
from collections import Counter

from core.config import RepetitionSettings

_PROMPT_MARKUP = re.compile(r"</?\s*(?:source|search_results)\b", re.IGNORECASE)
_FENCE = "```"


class RepetitionGuard:
    """Fed the reply as it grows; `cut` is where to end it once it has degenerated."""

    def __init__(self, settings: RepetitionSettings) -> None:
        self.settings = settings
        self._lines: Counter[str] = Counter()
        self._done_to = 0  # the text before this offset is in complete, counted lines
        self.cut: int | None = None
        self.reason = ""

    def feed(self, text: str) -> bool:
        """True once `text` (the whole reply so far) has degenerated; `cut` says where."""
        if self.cut is None:
            self._markup(text) or self._repeated_line(text) or self._periodic_tail(text)
        return self.cut is not None

    def _stop(self, at: int, reason: str) -> bool:
        self.cut, self.reason = at, reason
        return True

    def _markup(self, text: str) -> bool:
        found = _PROMPT_MARKUP.search(text, max(0, self._done_to - len("</search_results")))
        return found is not None and self._stop(found.start(), "it echoed the prompt's markup")

    def _repeated_line(self, text: str) -> bool:
        """A line of some length seen `max_line_repeats` times: cut before that occurrence."""
        s = self.settings
        while (end := text.find("\n", self._done_to)) != -1:
            start, self._done_to = self._done_to, end + 1
            line = " ".join(text[start:end].split()).casefold()
            if len(line) < s.min_line_chars or line.startswith(_FENCE) or not _worded(line):
                continue
            self._lines[line] += 1
            if self._lines[line] >= s.max_line_repeats:
                return self._stop(start, f"it repeated a line {s.max_line_repeats} times")
        return False

    def _periodic_tail(self, text: str) -> bool:
        """The reply ends in one stretch said `period_repeats` times back to back: keep one."""
        s = self.settings
        repeats = s.period_repeats
        for period in range(s.min_period_chars, s.max_period_chars + 1):
            if period * repeats > len(text):
                break
            unit = text[-period:]
            if not _worded(unit):
                continue
            if all(text[-period * (k + 1) : -period * k] == unit for k in range(1, repeats)):
                return self._stop(
                    len(text) - period * (repeats - 1), f"it said the same thing {repeats} times"
                )
        return False


def _worded(text: str) -> bool:
    """Whether `text` holds a letter or a digit: a divider (`=====`, `|---|---|`) said again
    and again is layout, not a loop."""
    return any(c.isalnum() for c in text)
