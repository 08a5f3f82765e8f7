"""The SQLite index's approximate vector side: the graph proposes, exact vectors decide, and the
graph follows every write of every process (a reused row id, a trimmed log, a corrupt file).

Vectors are random unit vectors of a few dimensions, looked up by text, so a query's true
nearest neighbours are known exactly and the exact scan is the reference."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from core.backends.sqlite.index import SqliteIndex
from core.config import Settings
from core.domain.documents import (
    Chunk,
    DocumentRecord,
    Progress,
    SearchFilters,
    SearchMode,
    Vectors,
)

DIMS = 16
DOCS = 300  # two chunks each: 600 chunks, above the graph's threshold below
K = 10


class TableEmbedder:
    """Each text's vector is looked up (documents) or given (queries): `q:<i>` is chunk i's
    vector with a little noise, so its nearest neighbours are computable exactly."""

    model_id, dimensions = "table", DIMS

    def __init__(self, vectors: dict[str, Vectors]) -> None:
        self.vectors = vectors

    async def embed_documents(
        self, texts: Sequence[str], progress: Progress | None = None
    ) -> Vectors:
        return np.stack([self.vectors[t] for t in texts])

    async def embed_query(self, text: str) -> Vectors:
        return self.vectors[text]


def _unit(rng: np.random.Generator, n: int) -> Vectors:
    v = rng.normal(size=(n, DIMS)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture
def table() -> dict[str, Vectors]:
    rng = np.random.default_rng(3)
    chunks = _unit(rng, DOCS * 2)
    vectors = {f"text {i}": chunks[i] for i in range(len(chunks))}
    noisy = chunks + rng.normal(0, 0.05, chunks.shape).astype(np.float32)
    for i, v in enumerate(noisy):
        vectors[f"q:{i}"] = v / np.linalg.norm(v)
    return vectors


def _settings(settings: Settings, **approximate: object) -> Settings:
    wanted = {"min_chunks": 100, "save_after_changes": 1_000_000, **approximate}
    graph = settings.search.approximate.model_copy(update=wanted)
    search = settings.search.model_copy(update={"approximate": graph})
    return settings.model_copy(update={"search": search})


def _open(path: Path, table: dict[str, Vectors], settings: Settings) -> SqliteIndex:
    return SqliteIndex(path, TableEmbedder(table), settings.search)


async def _write_doc(
    index: SqliteIndex, table: dict[str, Vectors], n: int, texts: list[str], source: str = "kb"
) -> None:
    doc_id = f"doc{n}"
    chunks = [
        Chunk(f"{doc_id}-{i}", doc_id, source, doc_id, "", f"https://x/{doc_id}", text, i)
        for i, text in enumerate(texts)
    ]
    record = DocumentRecord(doc_id, source, doc_id, f"https://x/{doc_id}", "c", len(chunks))
    await index.replace_document(record, chunks, np.stack([table[t] for t in texts]))


async def _fill(index: SqliteIndex, table: dict[str, Vectors]) -> None:
    for n in range(DOCS):
        source = "small" if n % 50 == 0 else "kb"
        await _write_doc(index, table, n, [f"text {2 * n}", f"text {2 * n + 1}"], source)


async def _filled(path: Path, table: dict[str, Vectors], settings: Settings) -> SqliteIndex:
    """An index of every chunk, its graph saved as an ingest's end saves it."""
    index = _open(path, table, settings)
    await _fill(index, table)
    await index.refresh()
    return index


async def _vector_top(index: SqliteIndex, query: str, **kw: object) -> list[str]:
    hits = await index.search(query, k=K, mode=SearchMode.VECTOR, **kw)  # type: ignore[arg-type]
    return [h.chunk.text for h in hits]


async def test_graph_search_ranks_as_the_exact_scan(
    tmp_path: Path, settings: Settings, table: dict[str, Vectors]
) -> None:
    path = tmp_path / "index.sqlite"
    graph = _open(path, table, _settings(settings))
    exact = _open(path, table, _settings(settings, enabled=False))
    await _fill(graph, table)
    await graph.refresh()
    assert graph.vector_side().startswith("approximate (600 vectors")
    assert path.with_name("index.sqlite.vectors").is_file()
    same = 0
    for i in range(0, DOCS * 2, 7):
        found = await _vector_top(graph, f"q:{i}")
        assert found[0] == f"text {i}"
        same += found == await _vector_top(exact, f"q:{i}")
    assert exact.vector_side() == "exact scan"
    assert same == len(range(0, DOCS * 2, 7))  # re-scored exactly: the same order, not near it
    hits = await graph.search("q:4", k=3, mode=SearchMode.VECTOR)
    assert hits[0].vector_score == pytest.approx(float(table["q:4"] @ table["text 4"]), abs=1e-5)


async def test_another_process_writes_are_followed_even_into_a_reused_row_id(
    tmp_path: Path, settings: Settings, table: dict[str, Vectors]
) -> None:
    path = tmp_path / "index.sqlite"
    searcher = _open(path, table, _settings(settings))
    writer = await _filled(path, table, _settings(settings))
    assert (await _vector_top(searcher, "q:599"))[0] == "text 599"
    # The newest document is deleted and another written: SQLite gives its chunks the freed
    # row ids, which a graph keyed by row id must not mistake for the old vectors.
    row_ids = {c.chunk_id: r for r, c in searcher._chunks_by_id(list(range(590, 601))).items()}
    await writer.delete_document(f"doc{DOCS - 1}")
    await _write_doc(writer, table, 1000, ["text 10", "text 11"])  # vectors of doc5's chunks
    reused = {c.chunk_id: r for r, c in searcher._chunks_by_id(list(range(590, 601))).items()}
    assert reused["doc1000-0"] == row_ids["doc299-0"]
    top = await _vector_top(searcher, "q:599")
    assert "text 599" not in top
    assert "doc1000" in {h.chunk.doc_id for h in await searcher.search("q:10", k=2)}


async def test_a_saved_graph_is_loaded_not_rebuilt_and_a_trimmed_log_reloads_it(
    tmp_path: Path,
    settings: Settings,
    table: dict[str, Vectors],
    caplog: pytest.LogCaptureFixture,
) -> None:
    path = tmp_path / "index.sqlite"
    writer = await _filled(path, table, _settings(settings, save_after_changes=1))
    caplog.set_level(logging.INFO, logger="core.backends.sqlite.vectors")
    caplog.clear()  # the writer's own build, logged if another test left INFO on
    searcher = _open(path, table, _settings(settings))
    assert (await _vector_top(searcher, "q:3"))[0] == "text 3"
    assert "building the vector graph" not in caplog.text
    # The writer changes a document and saves (trimming the log past the searcher's graph).
    await _write_doc(writer, table, 1, ["text 598", "text 599"])
    await writer.refresh()
    db = writer._reader()
    assert db.execute("SELECT count(*) FROM vector_log").fetchone()[0] == 0
    assert "doc1" in {h.chunk.doc_id for h in await searcher.search("q:598", k=3)}
    assert "text 2" not in await _vector_top(searcher, "q:2")
    assert "building the vector graph" not in caplog.text


async def test_a_corrupt_or_foreign_graph_file_is_rebuilt(
    tmp_path: Path,
    settings: Settings,
    table: dict[str, Vectors],
    caplog: pytest.LogCaptureFixture,
) -> None:
    path = tmp_path / "index.sqlite"
    await _filled(path, table, _settings(settings))
    caplog.set_level(logging.INFO, logger="core")
    # Built for f16 vectors: an i8 graph is not that file.
    other = _open(path, table, _settings(settings, quantization="f16"))
    assert (await _vector_top(other, "q:8"))[0] == "text 8"
    assert "building the vector graph of 600 chunks" in caplog.text
    caplog.clear()
    path.with_name("index.sqlite.vectors").write_bytes(b"not a graph" * 100)
    fresh = _open(path, table, _settings(settings))
    assert (await _vector_top(fresh, "q:9"))[0] == "text 9"
    assert "can't read the vector graph" in caplog.text
    assert "building the vector graph of 600 chunks" in caplog.text


async def test_filters_keep_only_their_chunks_even_when_the_graph_offers_few(
    tmp_path: Path, settings: Settings, table: dict[str, Vectors]
) -> None:
    """Source `small` holds 12 of 600 chunks: the graph's candidates for a query near a `kb`
    chunk hold few or none of them, so the filtered side scans what the filter allows."""
    path = tmp_path / "index.sqlite"
    index = _open(path, table, _settings(settings, rescore=20, filtered_rescore_factor=1))
    exact = _open(path, table, _settings(settings, enabled=False))
    await _fill(index, table)
    only_small = SearchFilters(sources=("small",))
    found = await _vector_top(index, "q:7", filters=only_small)
    assert len(found) == K
    assert found == await _vector_top(exact, "q:7", filters=only_small)
    hits = await index.search("q:7", k=K, mode=SearchMode.VECTOR, filters=only_small)
    assert {h.chunk.source for h in hits} == {"small"}


async def test_below_the_threshold_the_graph_and_its_log_are_dropped(
    tmp_path: Path, settings: Settings, table: dict[str, Vectors]
) -> None:
    path = tmp_path / "index.sqlite"
    index = await _filled(path, table, _settings(settings))
    graph_file = path.with_name("index.sqlite.vectors")
    assert graph_file.is_file()
    for n in range(60, DOCS):
        await index.delete_document(f"doc{n}")
    await index.refresh()  # 120 chunks left... still above 100
    assert graph_file.is_file()
    for n in range(20, 60):
        await index.delete_document(f"doc{n}")
    await index.refresh()  # 40 chunks: the exact scan
    assert not graph_file.exists()
    assert index._reader().execute("SELECT count(*) FROM vector_log").fetchone()[0] == 0
    assert (await _vector_top(index, "q:5"))[0] == "text 5"
    assert index.vector_side() == "exact scan"
    for n in range(20, 80):  # and back above it, without an ingest's refresh: the graph again
        await _write_doc(index, table, n, [f"text {2 * n}", f"text {2 * n + 1}"])
    assert (await _vector_top(index, "q:150"))[0] == "text 150"
    assert index.vector_side().startswith("approximate (160 vectors")


async def test_rebuild_builds_from_every_stored_vector(
    tmp_path: Path, settings: Settings, table: dict[str, Vectors]
) -> None:
    path = tmp_path / "index.sqlite"
    index = _open(path, table, _settings(settings))
    await _fill(index, table)
    seen: list[tuple[int, int]] = []
    assert await index.rebuild_vectors(lambda done, total: seen.append((done, total))) == 600
    assert seen[-1] == (600, 600)
    assert (await _vector_top(_open(path, table, _settings(settings)), "q:1"))[0] == "text 1"


async def test_a_graph_that_cannot_be_saved_fails_no_ingest_and_keeps_the_log(
    tmp_path: Path,
    settings: Settings,
    table: dict[str, Vectors],
    caplog: pytest.LogCaptureFixture,
) -> None:
    path = tmp_path / "index.sqlite"
    path.with_name("index.sqlite.vectors").mkdir()  # where the file should go: not writable as one
    caplog.set_level(logging.WARNING, logger="core")
    index = await _filled(path, table, _settings(settings))  # refresh() raised nothing
    assert "can't save the vector graph" in caplog.text
    assert index._reader().execute("SELECT count(*) FROM vector_log").fetchone()[0] == 600
    assert (await _vector_top(index, "q:42"))[0] == "text 42"  # the graph, in memory
    assert index.vector_side().startswith("approximate (600 vectors")


async def test_a_new_database_does_not_take_the_graph_left_by_a_deleted_one(
    tmp_path: Path, settings: Settings, table: dict[str, Vectors]
) -> None:
    """ "Delete the index and ingest again" (the advice for a damaged one) must not leave the
    old graph in charge: its row ids are the old database's."""
    path = tmp_path / "index.sqlite"
    old = await _filled(path, table, _settings(settings))
    await old.close()
    for leftover in tmp_path.glob("index.sqlite*"):
        if leftover.suffix != ".vectors" and not leftover.name.endswith(".vectors.json"):
            leftover.unlink()
    assert path.with_name("index.sqlite.vectors").is_file()
    new = _open(path, table, _settings(settings))
    for n in reversed(range(DOCS)):  # other row ids for the same chunks
        await _write_doc(new, table, n, [f"text {2 * n}", f"text {2 * n + 1}"])
    await new.refresh()
    for i in range(0, DOCS * 2, 7):
        assert (await _vector_top(new, f"q:{i}"))[0] == f"text {i}"
