"""Files a command is asked to write (`--json`, `--html`, `--write`): checked when the command
line is read, so a folder given for a file or a place this user can't write is refused before
minutes of work, not found after it; and written with the failure as one line."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from bot.cli.app import out, refuse


def checked_output(path: Path | None) -> Path | None:
    """typer's callback for an option naming a file to write."""
    if path is None:
        return None
    if path.is_dir():
        raise typer.BadParameter(f"{path} is a folder: name the file to write")
    _check_writable_under(path.parent, path)
    return path


def checked_output_folder(path: Path) -> Path:
    """typer's callback for an argument naming a folder to write files in (`bot eval
    export-feedback DIR`): a file given for it used to be found only once there was something
    to write, and with nothing to write the command said it had written to that file."""
    if path.exists() and not path.is_dir():
        raise typer.BadParameter(f"{path} is a file: name the folder to write in")
    _check_writable_under(path, path)
    return path


def _check_writable_under(folder: Path, path: Path) -> None:
    """The nearest existing folder at or above `folder` is a folder this user may write in:
    the folders missing below it are made when `path` is written."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise typer.BadParameter(f"{folder} is a file, so {path} can't be written")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise typer.BadParameter(f"can't write in {folder} as this user")


def write_output(path: Path, text: str) -> None:
    """The file's folder made, the text written, and said; a failure is the one error line."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        refuse(f"can't write {path}: {exc.strerror or exc}")
    out.print(f"Wrote {path}")
