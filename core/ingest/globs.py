"""Which files of a folder or repository a source takes: its `include` and `exclude` lists as
.gitignore patterns (pathspec: the same rules as git itself), matched against the path from the
source's root. A file left out is not part of the source at all: not listed as skipped, and
pruned if it was indexed before (a file moved out of `docs/` leaves the index)."""

from __future__ import annotations

from collections.abc import Sequence

import pathspec


class PathFilter:
    def __init__(self, include: Sequence[str], exclude: Sequence[str]) -> None:
        self._include = pathspec.GitIgnoreSpec.from_lines(include) if include else None
        self._exclude = pathspec.GitIgnoreSpec.from_lines(exclude) if exclude else None

    def takes(self, relative: str) -> bool:
        if self._include is not None and not self._include.match_file(relative):
            return False
        return self._exclude is None or not self._exclude.match_file(relative)
