"""`bench.sheet_parse` on a small workbook: its three ways read the same cells, the shipped
parse shows the ratio column as Excel does, and each way is timed."""

from __future__ import annotations

from bench.sheet_parse import HEADER, WAYS, measure, workbook_of
from core.config import IngestSettings
from core.ingest.sections import ParseLimits
from core.ingest.sheets import parse_sheets


def test_the_ways_read_the_same_cells_and_each_is_timed() -> None:
    data = workbook_of(50)
    counts = {way: read(data) for way, read in WAYS.items() if "parse" not in way}
    assert set(counts.values()) == {len(HEADER) * 51}  # every cell, the header's too
    (sheet,) = parse_sheets(data, "x", ParseLimits.from_settings(IngestSettings())).sections
    assert "Tickets: 1 | Resolved: 0.1% | Since: 2024-01-02" in sheet.text  # 1/997, as shown
    medians = measure([50], runs=1)["50 rows"]["seconds_median"]
    assert isinstance(medians, dict)
    assert set(medians) == set(WAYS)
    assert all(seconds > 0 for seconds in medians.values())
