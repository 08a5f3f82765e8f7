from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from core.backends.sqlite.index import SqliteIndex
from core.config import SearchSettings
from core.errors import EmbedderError, SearchIndexError
from core.search import embedder as embedder_module
from core.search.embedder import MINILM_DIMENSIONS, CachedEmbedder, MiniLMEmbedder, ModelFiles
from core.search.embedding_cache import EmbeddingCache, content_hash


def _copy_files(tmp_path: Path) -> ModelFiles:
    real = ModelFiles.installed()
    model, tokenizer = tmp_path / "model.onnx", tmp_path / "tokenizer.json"
    shutil.copyfile(real.model, model)
    shutil.copyfile(real.tokenizer, tokenizer)
    return ModelFiles(model, tokenizer)


def test_corrupted_model_file_is_refused(tmp_path: Path) -> None:
    files = _copy_files(tmp_path)
    data = bytearray(files.model.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte in the weights
    files.model.write_bytes(bytes(data))
    with pytest.raises(EmbedderError, match=r"refusing .*model\.onnx: sha256 .* does not match"):
        MiniLMEmbedder(files, batch_size=8, max_tokens=256, threads=1).load()


def test_corrupted_tokenizer_is_refused(tmp_path: Path) -> None:
    files = _copy_files(tmp_path)
    files.tokenizer.write_text(files.tokenizer.read_text().replace("[UNK]", "[UNX]", 1))
    with pytest.raises(EmbedderError, match=r"tokenizer\.json: sha256"):
        MiniLMEmbedder(files, batch_size=8, max_tokens=256, threads=1).load()


def test_missing_model_file_is_a_clear_error(tmp_path: Path) -> None:
    files = _copy_files(tmp_path)
    files.model.unlink()
    with pytest.raises(EmbedderError, match="can't read model file"):
        MiniLMEmbedder(files, batch_size=8, max_tokens=256, threads=1).load()


def test_vectors_are_normalised_and_batching_changes_nothing(minilm: MiniLMEmbedder) -> None:
    texts = ["short", "a somewhat longer sentence about search indexes", "x " * 400]
    batched = minilm.embed_sync(texts)
    single = np.stack([minilm.embed_sync([t])[0] for t in texts])
    assert batched.shape == (3, MINILM_DIMENSIONS)
    assert np.allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)
    assert np.allclose(batched, single, atol=1e-4)


def test_similar_meaning_scores_higher(minilm: MiniLMEmbedder) -> None:
    query, near, far = minilm.embed_sync(
        ["how do I reset my password", "steps to change a forgotten password", "banana bread"]
    )
    assert float(query @ near) > float(query @ far) + 0.3


async def test_cache_embeds_each_text_once(minilm: MiniLMEmbedder, tmp_path: Path) -> None:
    cache_path = tmp_path / "cache.sqlite"
    first = CachedEmbedder(minilm, EmbeddingCache(cache_path, minilm.model_id, 384), 16)
    texts = ["alpha passage", "beta passage", "alpha passage"]
    vectors = await first.embed_documents(texts)
    assert first.computed == 2  # the duplicate is embedded once
    assert np.allclose(vectors[0], vectors[2])

    # A new process (new cache object, same file) reuses everything.
    second = CachedEmbedder(minilm, EmbeddingCache(cache_path, minilm.model_id, 384), 16)
    again = await second.embed_documents([*texts, "gamma passage"])
    assert (second.computed, second.reused) == (1, 3)
    assert np.allclose(again[:3], vectors)


async def test_cache_is_keyed_by_model(minilm: MiniLMEmbedder, tmp_path: Path) -> None:
    cache_path = tmp_path / "cache.sqlite"
    EmbeddingCache(cache_path, "other-model", 384).put_many([("h", np.ones(384, np.float32))])
    assert EmbeddingCache(cache_path, minilm.model_id, 384).get_many(["h"]) == {}


def test_a_damaged_cache_is_set_aside_and_a_new_one_started(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The cache only saves work: a damaged file must not stop an ingest or a question."""
    cache_path = tmp_path / "cache.sqlite"
    cache_path.write_bytes(b"garbage\x00not a database \xff" * 500)  # bytes: a damaged page
    caplog.set_level(logging.WARNING, logger="core")
    cache = EmbeddingCache(cache_path, "model", 4)
    (aside,) = tmp_path.glob("cache.sqlite.corrupt-*")
    assert aside.read_bytes().startswith(b"garbage")  # kept for a look, not deleted
    assert f"{cache_path} is damaged (file is not a database): moved aside to {aside}" in (
        caplog.text
    )
    cache.put_many([("h", np.ones(4, np.float32))])
    assert list(EmbeddingCache(cache_path, "model", 4).get_many(["h"])) == ["h"]


def test_a_cache_that_cannot_be_opened_is_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "a-file").write_text("")
    cache_path = tmp_path / "a-file" / "cache.sqlite"
    caplog.set_level(logging.WARNING, logger="core")
    cache = EmbeddingCache(cache_path, "model", 4)
    off = "embedding cache off, embeddings are computed again as needed"
    assert f"{off}: can't make the folder of {cache_path}" in caplog.text
    cache.put_many([("h", np.ones(4, np.float32))])
    assert cache.get_many(["h"]) == {}
    assert cache.count() == 0


def test_a_text_file_named_as_the_cache_is_left_as_it_is(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`embeddings.cache_path` pointing at someone's notes: set aside as damaged, they were
    renamed away; now the cache is off, and the file untouched."""
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\n\nKeep these.\n" * 100)
    caplog.set_level(logging.WARNING, logger="core")
    cache = EmbeddingCache(notes, "model", 4)
    assert f"{notes} is no database but a text file" in caplog.text
    assert not list(tmp_path.glob("notes.md.corrupt-*"))
    assert notes.read_text().startswith("# Notes")
    cache.put_many([("h", np.ones(4, np.float32))])
    assert cache.get_many(["h"]) == {}


def test_the_model_loads_on_first_use_and_a_broken_one_fails_there(tmp_path: Path) -> None:
    """Commands that embed nothing (an unchanged re-ingest, `bot doctor`) must not pay the
    second of CPU the model costs; the checksum check still guards every embedding."""
    files = _copy_files(tmp_path)
    files.model.unlink()
    embedder = MiniLMEmbedder(files, batch_size=8, max_tokens=256, threads=1)  # no error yet
    with pytest.raises(EmbedderError, match="can't read model file"):
        embedder.embed_sync(["anything"])


def test_the_embedders_of_one_process_share_one_load_and_a_failed_one_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each command's runtime, bench and test makes its own embedder: the model is verified
    and loaded once per process for the same files and threads, not once per embedder."""
    sessions: list[int] = []
    real_session = embedder_module._session

    def counted(files: ModelFiles, threads: int) -> object:
        sessions.append(threads)
        return real_session(files, threads)

    monkeypatch.setattr(embedder_module, "_session", counted)
    files = _copy_files(tmp_path)
    good = files.model.read_bytes()
    files.model.write_bytes(good[:-1])  # damaged: refused, and the refusal not kept
    with pytest.raises(EmbedderError, match="sha256"):
        MiniLMEmbedder(files, batch_size=8, max_tokens=256, threads=1).load()
    files.model.write_bytes(good)
    first, second = (
        MiniLMEmbedder(files, batch_size=8, max_tokens=256, threads=1, query_threads=1)
        for _ in range(2)
    )
    assert np.array_equal(first.embed_sync(["deploy"]), second.embed_sync(["deploy"]))
    assert sessions == [1]
    MiniLMEmbedder(files, batch_size=8, max_tokens=256, threads=2, query_threads=1).load()
    assert sessions == [1, 2, 1]  # other threads: a load of their own


async def test_a_query_on_its_own_threads_gets_the_documents_vector() -> None:
    """`embeddings.query_threads`: queries run on a session of their own (fewer threads); the
    vector must be the one a document of the same text gets, or search would drift."""
    split = MiniLMEmbedder(batch_size=8, max_tokens=256, threads=2, query_threads=1)
    model = split._loaded()
    assert model.query_session is not model.session
    text = "How do I re-ingest changed documents?"
    query = await split.embed_query(text)
    document = (await split.embed_documents([text]))[0]
    assert np.allclose(query, document, atol=1e-5)
    same = MiniLMEmbedder(batch_size=8, max_tokens=256, threads=1, query_threads=1)
    assert same._loaded().query_session is same._loaded().session  # one session when equal


async def test_another_truncation_is_another_model(tmp_path: Path) -> None:
    """`embeddings.max_tokens` changes the vectors of every passage longer than it: an index
    built at one length must refuse the other (it says to rebuild), and the cache must miss
    rather than hand back vectors cut at the old length."""
    native = MiniLMEmbedder(batch_size=8, max_tokens=256, threads=1)
    short = MiniLMEmbedder(batch_size=8, max_tokens=16, threads=1)
    assert native.model_id != short.model_id
    long_text = "the bot answers from the team's documents with linked sources " * 8
    cut, whole = short.embed_sync([long_text])[0], native.embed_sync([long_text])[0]
    assert not np.allclose(cut, whole, atol=1e-3)  # the ids differ because the vectors do

    index = SqliteIndex(tmp_path / "index.sqlite", native, SearchSettings())
    await index.close()
    with pytest.raises(SearchIndexError, match="16-tokens"):
        SqliteIndex(tmp_path / "index.sqlite", short, SearchSettings())

    cache_path = tmp_path / "cache.sqlite"
    cache = EmbeddingCache(cache_path, native.model_id, MINILM_DIMENSIONS)
    await CachedEmbedder(native, cache, query_cache_size=0).embed_documents([long_text])
    assert cache.get_many([content_hash(long_text)])  # stored for the native length
    other = EmbeddingCache(cache_path, short.model_id, MINILM_DIMENSIONS)
    assert other.get_many([content_hash(long_text)]) == {}


async def test_a_cancelled_embedding_stops_after_its_current_batch() -> None:
    """Ctrl-C during an ingest cancels the task awaiting the embedding, but not the worker
    thread running it, which the process waits for before it exits: it went on through every
    batch of its group (Ctrl-C took 6 s), and now stops at the next batch boundary. The first
    batch's progress report holds the thread until the task is cancelled."""
    import asyncio
    import threading

    embedder = MiniLMEmbedder(batch_size=2, max_tokens=256, threads=1)
    texts = [f"passage number {i} about deploying" for i in range(8)]  # 4 batches of 2
    reached_first, cancelled = threading.Event(), threading.Event()
    batches = []

    def progress(done: int) -> None:
        batches.append(done)
        reached_first.set()
        cancelled.wait(timeout=30)

    task = asyncio.create_task(embedder.embed_documents(texts, progress))
    assert await asyncio.to_thread(reached_first.wait, 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    cancelled.set()  # the thread goes on from the first batch's report
    await asyncio.sleep(1.0)  # ample for the three tiny batches left, had it gone on
    assert batches == [2]
