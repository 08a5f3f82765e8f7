"""What reading an Excel sheet costs, and what reading its cells' number formats adds (a
percentage is shown as Excel shows it, `15%`, which takes openpyxl's cell objects instead of
its bare values).

A workbook of N rows is made here (openpyxl's write-only mode: names, teams, counts, a ratio
formatted as a percentage, a date, a note), then, in one process, taking turns run by run:
openpyxl streaming the rows as bare values (what the reader did before), streaming them as
cells with each one's value and number format read (what it does now), and the whole
`parse_sheets`. Figures are the medians of the runs' seconds; nothing is downloaded.

    python -m bench.sheet_parse [--rows 20000,100000] [--runs 5]
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import statistics
import time
from collections.abc import Callable

from openpyxl import Workbook, load_workbook
from openpyxl.cell import WriteOnlyCell

from bench.common import unbounded_parse_limits, write_result
from core.ingest.sheets import parse_sheets

HEADER = ["Name", "Team", "Tickets", "Resolved", "Since", "Note"]
PERCENT = "0.0%"
MB = 1_000_000


def workbook_of(rows: int) -> bytes:
    book = Workbook(write_only=True)
    sheet = book.create_sheet("Tickets")
    sheet.append(HEADER)
    for n in range(rows):
        resolved = WriteOnlyCell(sheet, value=(n % 997) / 997)
        resolved.number_format = PERCENT
        since = dt.datetime(2024, 1, 1) + dt.timedelta(days=n % 700)
        note = f"Escalate to on-call after {n % 48} hours"
        sheet.append([f"Person {n}", f"team-{n % 40}", n % 311, resolved, since, note])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def _values(data: bytes) -> int:
    book = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    try:
        return sum(
            sum(value is not None for value in row)
            for sheet in book.worksheets
            for row in sheet.iter_rows(values_only=True)
        )
    finally:
        book.close()


def _cells(data: bytes) -> int:
    book = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    try:
        return sum(
            sum(cell.value is not None and cell.number_format is not None for cell in row)
            for sheet in book.worksheets
            for row in sheet.iter_rows()
        )
    finally:
        book.close()


def _parse(data: bytes) -> int:
    return sum(
        len(s.text) for s in parse_sheets(data, "bench.xlsx", unbounded_parse_limits()).sections
    )


WAYS: dict[str, Callable[[bytes], int]] = {
    "values only (before)": _values,
    "cells with number formats": _cells,
    "parse_sheets (shipped)": _parse,
}


def measure(sizes: list[int], runs: int) -> dict[str, dict[str, object]]:
    """Per size: each way's median seconds over `runs`, the ways' order turned each run."""
    results: dict[str, dict[str, object]] = {}
    for rows in sizes:
        data = workbook_of(rows)
        seconds: dict[str, list[float]] = {way: [] for way in WAYS}
        for run in range(runs):
            order = list(WAYS) if run % 2 == 0 else list(reversed(WAYS))
            for way in order:
                started = time.perf_counter()
                WAYS[way](data)
                seconds[way].append(time.perf_counter() - started)
        medians = {way: round(statistics.median(s), 3) for way, s in seconds.items()}
        values, cells = medians["values only (before)"], medians["cells with number formats"]
        results[f"{rows} rows"] = {
            "file_mb": round(len(data) / MB, 2),
            "seconds_median": medians,
            "cells_over_values": round(cells / values, 2) if values else None,
        }
        print(f"{rows} rows: {results[f'{rows} rows']}", flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", default="20000,100000")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    sizes = [int(s) for s in args.rows.split(",")]
    results = measure(sizes, args.runs)
    path = write_result("sheet-parse.json", {"runs": args.runs, "sizes": results})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
