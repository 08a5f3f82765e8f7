"""The `bot` command, one module per command group; importing this registers them all, in the
order `bot --help` lists them."""

# isort: skip_file
from bot.cli import ingest, search, converse, serve, index, keywords, doctor, eval  # noqa: F401
from bot.cli.app import app, main

__all__ = ["app", "main"]
