"""A secret the command needs is not set: said in one line, with the commonest cause when it is
the one (a `.env` file that sets it, which only docker compose reads)."""

from __future__ import annotations

import re
from pathlib import Path

from core.errors import MissingSecret

# docker compose's file of variables, beside docker-compose.yml; the bot never reads its values.
COMPOSE_ENV_FILE = Path(".env")


def missing_secret(name: str, purpose: str, env_file: Path = COMPOSE_ENV_FILE) -> MissingSecret:
    """The error for `name` not being set. When the working directory's `.env` assigns it, the
    line says so and what to do: the person who wrote the token there would otherwise read
    "not set" while looking at it. Only the names the file assigns are looked at, never a
    value, and a file that can't be read is no hint."""
    return MissingSecret(
        f"{name} is not set: it is needed {purpose}{env_file_hint(name, env_file)}"
    )


def env_file_hint(name: str, env_file: Path = COMPOSE_ENV_FILE) -> str:
    """ " (.env sets it, but ...: export it)" when `.env` assigns `name`, else ""."""
    if not _assigns(env_file, name):
        return ""
    return f" ({env_file} sets it, but only docker compose reads that file: export it)"


def _assigns(env_file: Path, name: str) -> bool:
    try:
        text = env_file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    assignment = re.compile(rf"^[ \t]*(?:export[ \t]+)?{re.escape(name)}[ \t]*=[ \t]*\S", re.M)
    return assignment.search(text) is not None
