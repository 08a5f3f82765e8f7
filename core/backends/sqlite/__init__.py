"""The embedded backend: one SQLite index file and one state file on this machine."""

from core.backends.sqlite.backend import SqliteBackend

__all__ = ["SqliteBackend"]
