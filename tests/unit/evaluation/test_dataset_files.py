"""A BEIR folder as a newcomer may hand it over: every defect is a `DatasetError` naming the
file and line and what is wrong there, never an unexpected ValueError or KeyError."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.errors import DatasetError
from core.evaluation.answers import load_references
from core.evaluation.retrieval import load_dataset

GOOD_QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\n"
GOOD_QUERIES = json.dumps({"_id": "q1", "text": "why do cats purr"}) + "\n"
GOOD_CORPUS = json.dumps({"_id": "d1", "title": "Cats", "text": "Cats purr."}) + "\n"


def _dataset(folder: Path, qrels: str, queries: str, corpus: str) -> Path:
    folder.mkdir()
    (folder / "qrels.tsv").write_text(qrels)
    (folder / "queries.jsonl").write_text(queries)
    (folder / "corpus.jsonl").write_text(corpus)
    return folder


@pytest.mark.parametrize(
    ("qrels", "queries", "corpus", "said"),
    [
        ("q1\td1\tabc\n", GOOD_QUERIES, GOOD_CORPUS, "qrels.tsv:1: the score is not a whole"),
        ("q1,d1,1\n", GOOD_QUERIES, GOOD_CORPUS, "qrels.tsv:1: not query-id, corpus-id and"),
        ("q1\td1\t0\n", GOOD_QUERIES, GOOD_CORPUS, "qrels.tsv: no judgement with a positive"),
        (GOOD_QRELS, '{"text": "no id"}\n', GOOD_CORPUS, "queries.jsonl:1: not an object with"),
        (GOOD_QRELS, GOOD_QUERIES, '["a"]\n', 'corpus.jsonl:1: not an object with an "_id"'),
        (GOOD_QRELS, GOOD_QUERIES, "\n{oops\n", "corpus.jsonl:2: not JSON"),
        (GOOD_QRELS, '{"_id": "q9", "text": "x"}\n', GOOD_CORPUS, "no query in queries.jsonl"),
        (GOOD_QRELS, GOOD_QUERIES, "", "corpus.jsonl holds no document"),
    ],
)
def test_each_defect_names_its_file_and_line(
    tmp_path: Path, qrels: str, queries: str, corpus: str, said: str
) -> None:
    folder = _dataset(tmp_path / "set", qrels, queries, corpus)
    with pytest.raises(DatasetError) as caught:
        load_dataset(folder)
    assert said in str(caught.value)
    assert str(folder) in str(caught.value)


def test_a_folder_that_is_not_there_is_named_as_such(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no such folder"):
        load_dataset(tmp_path / "nope")


def test_text_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    folder = _dataset(tmp_path / "set", GOOD_QRELS, GOOD_QUERIES, GOOD_CORPUS)
    (folder / "corpus.jsonl").write_bytes(b'{"_id": "d1", "text": "\xff\xfe"}\n')
    with pytest.raises(DatasetError, match=r"corpus\.jsonl is not UTF-8 text"):
        load_dataset(folder)


def test_a_good_folder_loads_and_its_references_too(tmp_path: Path) -> None:
    folder = _dataset(tmp_path / "set", GOOD_QRELS, GOOD_QUERIES, GOOD_CORPUS)
    (folder / "answers.jsonl").write_text('{"_id": "q1", "answer": "Contentment."}\n[1]\n')
    data = load_dataset(folder)
    assert (data.queries, data.qrels) == ({"q1": "why do cats purr"}, {"q1": {"d1": 1}})
    with pytest.raises(DatasetError, match=r'answers\.jsonl:2: not an object with an "_id"'):
        load_references(folder)
