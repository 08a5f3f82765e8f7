"""The `bot` command, one module per command group; importing this registers them all, in the
order `bot --help` lists them.

Each command imports what it uses inside itself: the SDKs and the model runtime cost seconds of
CPU at import, which `bot --help`, `bot ingest` or `bot doctor` must not pay for `bot slack`'s
sake (tests/integration/test_hostile_cli.py checks it)."""

# isort: skip_file
from bot.cli import ingest, search, converse, serve, index, keywords, report, sources, doctor, eval  # noqa: F401
from bot.cli.app import app, main

__all__ = ["app", "main"]
