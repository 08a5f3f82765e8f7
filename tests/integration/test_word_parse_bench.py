"""`bench.word_parse` at 1 MB: the child process parses the file it was given, reports its
time and memory, and the sections come out as the file holds them."""

from __future__ import annotations

from bench.word_parse import HEADING_EVERY, MB, PARAGRAPH, measure


def test_the_bench_measures_a_parse_in_a_child_process() -> None:
    rows = measure([1], runs=1)
    row = rows["1 MB of XML"]
    paragraphs = MB // len(PARAGRAPH)
    assert row["sections"] == -(-paragraphs // HEADING_EVERY)  # a Part each (with "End." last)
    assert row["seconds_median"] > 0
    assert row["added_rss_mb_median"] > 0
    assert 0 < row["file_mb"] < 1  # 1 MB of XML compresses
