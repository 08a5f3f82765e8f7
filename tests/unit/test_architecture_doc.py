"""ARCHITECTURE.md names every module of core/, adapters/ and bot/, and only modules that exist:
`core/ingest/memory.py`, `core/search/terms.py` and `threads.py`, `adapters/slack/feedback.py`
and `payloads.py`, `bot/logs.py` and `bot/progress.py` had come without a word there. A module
is named by its path (`core/sqlite.py`, `core.search.terms`) or, in its package's row of a
table (the row that names `core/search/`), by its name in backticks. `bot/cli/` is described
as a whole: one module per command group."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from tests.conftest import REPO

_TEXT = re.sub(r"```.*?```", "", (REPO / "ARCHITECTURE.md").read_text(), flags=re.S)
_LINES = [(line, re.findall(r"`([^`]+)`", line)) for line in _TEXT.splitlines()]


def _modules() -> list[Path]:
    return sorted(
        path.relative_to(REPO)
        for top in ("core", "adapters", "bot")
        for path in (REPO / top).rglob("*.py")
        if path.name not in {"__init__.py", "__main__.py"}
        and path.relative_to(REPO).parts[:2] != ("bot", "cli")
    )


def _named(module: Path) -> bool:
    slashed = module.with_suffix("").as_posix()
    dotted = ".".join(module.with_suffix("").parts)
    own_word = re.compile(rf"(?<!\w){re.escape(module.stem)}(?!\w)")
    package_row = f"`{module.parent.as_posix()}/`"
    for line, spans in _LINES:
        if any(slashed in span or dotted in span for span in spans):
            return True
        if package_row in line and any(own_word.search(span) for span in spans):
            return True
    return False


def test_every_module_is_named_in_architecture_md() -> None:
    missing = [str(module) for module in _modules() if not _named(module)]
    assert not missing, f"ARCHITECTURE.md does not name {missing}"


def test_every_module_path_architecture_md_names_exists() -> None:
    named = {
        match
        for _, spans in _LINES
        for span in spans
        for match in re.findall(r"\b(?:core|adapters|bot)/[\w/]+\.py\b", span)
    }
    gone = sorted(path for path in named if not (REPO / path).is_file())
    assert not gone, f"ARCHITECTURE.md names modules that do not exist: {gone}"


def test_the_layers_drawn_are_the_layers_import_linter_checks() -> None:
    """The diagram's `core:` line is the layers contract of pyproject.toml, layer by layer, and
    the README's summary of it is the same order."""
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    [layers] = [c["layers"] for c in contracts["contracts"] if c["type"] == "layers"]
    names = [
        " | ".join(m.strip().removeprefix("core.") for m in layer.split("|")) for layer in layers
    ]
    drawn = re.search(r"^core:\s+(.*)$", (REPO / "ARCHITECTURE.md").read_text(), re.M)
    assert drawn is not None
    sides = [{m.strip() for m in part.split("|")} for part in drawn.group(1).split("─▶")]
    assert sides == [{m.strip() for m in layer.split("|")} for layer in names]
    readme = " ".join((REPO / "README.md").read_text().split())
    assert " > ".join(names[:-1]) in readme  # the README leaves out `errors`, the floor
