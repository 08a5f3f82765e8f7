"""Hostile input to `bot ingest`: each bad file or URL is skipped with its exact reason, in
bounded time and memory, and the rest of the run is indexed. Real parts throughout: the real
model, the SQLite index, httpx against a local aiohttp server, the CLI in-process."""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import zlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from aiohttp import web
from typer.testing import CliRunner

from bench.hostile_ingest import PEAK_RSS_LIMIT_MB, build_hostile_folder
from bot.cli import app
from core.backends.sqlite.index import SqliteIndex
from core.backends.sqlite.run_locks import SqliteRunLocks
from core.config import Settings
from core.domain.documents import DocumentRecord, Outcome
from core.ingest.pipeline import Ingestor, PreparedDocument, build_chunks
from core.ingest.sections import ParsedDocument, Section
from core.search.embedder import CachedEmbedder
from tests.conftest import REPO
from tests.integration.test_hostile_cli import BOT, run_bot, unprivileged

runner = CliRunner()
PARSING_BY_S = 6  # a bot process starts and reads a file in 2-3 s
ENDS_WITHIN_S = 15


# ------------------------------------------------------------------------------ the folder


def test_the_hostile_folder_bench_indexes_the_good_and_skips_each_bad_with_its_reason() -> None:
    """The Must-show run: `bot ingest` as a subprocess on every bad file plus 50 good ones."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "bench.hostile_ingest", "--runs", "1", "--no-save"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["good_indexed"] == 50
    assert result["skipped"] == {
        "attributes.html": "an element with 1,000,000 attributes (more than 1,000)",
        "bomb.pdf": "not a readable PDF: LimitReachedError: Limit reached while decompressing.",
        "broken.md": "broken symlink (its target does not exist)",
        "empty.md": "empty file",
        "filter.pdf": "not a readable PDF: NotImplementedError: Unsupported filter /FooDecode",
        "folder-link": "symlink to a folder (not followed)",
        "huge.txt": "over the limit of 20,000,000 bytes (ingest.max_file_bytes)",
        "loop_a.md": "symlink loop",
        "loop_b.md": "symlink loop",
        "nul.txt": "binary content (NUL byte at offset 10,000) in a text file",
        "outside.md": "symlink to a file outside the folder (not followed)",
        "pipe.md": "not a regular file (named pipe)",
        "recursion.pdf": "not a readable PDF: RecursionError: maximum recursion depth exceeded",
        "socket.md": "not a regular file (socket)",
        "zero.md": "not a regular file (character device)",
    }
    assert result["hostile_indexed"] == [
        "caf\ufffd-latin1-name.md",
        "deep.html",
        "heading.md",
        "long-line.txt",
        "quotes.md",
    ]
    assert result["peak_rss_mb_max"] < PEAK_RSS_LIMIT_MB
    assert time.monotonic() - started < 90


async def test_each_hostile_file_is_handled_in_process(
    tmp_path: Path, ingestor: Ingestor, index: object
) -> None:
    """The same folder through the Ingestor: exact reasons, and the readable hostile files
    (20,000-level HTML, 105 KB heading, 10 MB line, Latin-1 name) indexed."""
    if not isinstance(index, SqliteIndex):
        pytest.skip("the folder's handling does not depend on the index backend")
    expected = build_hostile_folder(tmp_path / "docs")
    started = time.monotonic()
    report = await ingestor.ingest([str(tmp_path / "docs")], source="kb")
    assert time.monotonic() - started < 60
    reasons = {Path(s.display).name: s.reason for s in report.skipped}
    for name, reason in expected.items():
        if reason is None:
            assert name not in reasons
        else:
            assert reasons[name].startswith(reason), (name, reasons[name])
    assert report.counts[Outcome.ADDED] == 50 + sum(r is None for r in expected.values())
    assert report.failed == []


async def test_an_undecodable_file_name_is_indexed_under_a_safe_name(
    tmp_path: Path, ingestor: Ingestor, index: object
) -> None:
    """It used to fail its whole embedding group: 0 of 6 indexed."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(5):
        (docs / f"page{n}.md").write_text(f"# Page {n}\n\nAbout topic {n}.\n")
    (docs / os.fsdecode(b"r\xe9sum\xe9.md")).write_text("No heading: the title is the name.\n")
    report = await ingestor.ingest([str(docs)], source="kb")
    assert report.counts[Outcome.ADDED] == 6
    assert report.failed == []
    titles = {r.title for r in (await index.documents()).values()}  # type: ignore[attr-defined]
    assert "R\ufffdsum\ufffd" in titles


async def test_one_document_that_cannot_be_embedded_fails_alone(
    settings: Settings, index: object, embedder: CachedEmbedder
) -> None:
    ingestor = Ingestor(index, embedder, settings.ingest)  # type: ignore[arg-type]
    documents = []
    for n in range(6):
        text = f"Passage {n} about widgets." + ("\ud800" if n == 3 else "")  # lone surrogate
        parsed = ParsedDocument(f"Doc {n}", [Section("", None, text)])
        doc_id = f"file:///doc{n}.md"
        chunks = build_chunks(
            parsed, doc_id=doc_id, source="kb", url=doc_id, settings=settings.ingest
        )
        record = DocumentRecord(doc_id, "kb", parsed.title, doc_id, f"sum{n}", len(chunks))
        documents.append(PreparedDocument(record, chunks, f"doc{n}.md"))
    report = await _write(ingestor, documents)
    assert report.counts[Outcome.ADDED] == 5
    assert [f.display for f in report.failed] == ["doc3.md"]
    assert report.failed[0].reason.startswith("embedding failed: ")


async def _write(ingestor: Ingestor, documents: list[PreparedDocument]):  # type: ignore[no-untyped-def]
    from core.ingest.pipeline import IngestReport

    report = IngestReport()
    await ingestor.write(documents, {}, report)
    return report


# ------------------------------------------------------------------------------------ URLs


DRIP_BYTES = 60


async def _drip(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    response.content_length = DRIP_BYTES
    await response.prepare(request)
    for _ in range(DRIP_BYTES):  # one byte a second: each read is quick, the whole never is
        await response.write(b"x")
        await asyncio.sleep(1)
    return response


async def _bomb(request: web.Request) -> web.Response:
    body = gzip.compress(b"a" * 50_000_000, compresslevel=9)
    headers = {"Content-Type": "text/plain", "Content-Encoding": "gzip"}
    return web.Response(body=body, headers=headers)


def _compressed(data: bytes, coding: str) -> bytes:
    if coding == "deflate":  # the zlib stream HTTP names deflate
        return zlib.compress(data)
    if coding == "raw-deflate":  # what many servers send as deflate: no zlib header
        packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
        return packer.compress(data) + packer.flush()
    return gzip.compress(data, compresslevel=9)


async def _stacked_bomb(request: web.Request) -> web.Response:
    """329 bytes, three gzip layers, 100 MB inside: httpx inflated every layer of a read at
    once, the whole 100 MB (a GB, with more inside) before any byte count could stop it."""
    body = b"a" * 100_000_000
    for _ in range(3):
        body = gzip.compress(body, compresslevel=9)
    headers = {"Content-Type": "text/plain", "Content-Encoding": "gzip, gzip, gzip"}
    return web.Response(body=body, headers=headers)


async def _zstd(request: web.Request) -> web.Response:
    """A coding we do not ask for (httpx inflates it, unbounded, when zstandard is there)."""
    headers = {"Content-Type": "text/plain", "Content-Encoding": "zstd"}
    return web.Response(body=b"\x28\xb5\x2f\xfd not read", headers=headers)


def _encoded(coding: str):  # type: ignore[no-untyped-def]
    async def handler(request: web.Request) -> web.Response:
        body = _compressed(f"# Encoded\n\nSent as {coding}.\n".encode(), coding)
        http_coding = "deflate" if coding == "raw-deflate" else coding
        headers = {"Content-Type": "text/markdown", "Content-Encoding": http_coding}
        return web.Response(body=body, headers=headers)

    return handler


# path -> (Content-Type, body): text in other charsets than UTF-8, declared or not.
CHARSETS = {
    "/cp1252.html": (
        "text/html; charset=windows-1252",
        "<h1>Caf\u00e9 menu</h1><p>The caf\u00e9 serves \u201cflat whites\u201d.</p>".encode(
            "cp1252"
        ),
    ),
    "/meta-latin1.html": (
        "text/html",
        b'<meta charset="iso-8859-1"><h1>Cr\xe8me</h1><p>Cr\xe8me br\xfbl\xe9e on Fridays.</p>',
    ),
    "/utf16.txt": ("text/plain; charset=utf-16", "Na\u00efve tea on Mondays.".encode("utf-16")),
    # Declared Latin-1, sent as UTF-8 (a server's default charset left as it was): kept UTF-8.
    "/mislabelled.md": (
        "text/markdown; charset=iso-8859-1",
        "# Pi\u00f1a\n\nPi\u00f1a colada on Saturdays.\n".encode(),
    ),
    "/bogus.txt": ("text/plain; charset=x-bogus", "Caf\u00e9 au lait.".encode("latin-1")),
}


async def _charset(request: web.Request) -> web.Response:
    content_type, body = CHARSETS[request.path]
    return web.Response(body=body, headers={"Content-Type": content_type})


async def _private(request: web.Request) -> web.Response:
    if request.headers.get("Authorization") != "Basic dXNlcjpzM2NyM3QtcHc=":  # user:s3cr3t-pw
        return web.Response(status=401)
    return web.Response(text="# Private\n\nBehind basic auth.\n", content_type="text/markdown")


async def _slow(request: web.Request) -> web.Response:
    await asyncio.sleep(SLOW_S)
    return web.Response(text="late", content_type="text/plain")


async def _good(request: web.Request) -> web.Response:
    return web.Response(text="# Good\n\nA page that is there.\n", content_type="text/markdown")


SLOW_S = 2


async def _to_bad_port(request: web.Request) -> web.Response:
    """A Location no URL parser accepts (aiohttp's HTTPFound would refuse to send it)."""
    return web.Response(status=302, headers={"Location": "http://127.0.0.1:99999/x"})


def _redirect(location: str):  # type: ignore[no-untyped-def]
    async def handler(request: web.Request) -> web.Response:
        raise web.HTTPFound(location)

    return handler


@pytest.fixture
async def site() -> AsyncIterator[str]:
    app_ = web.Application()
    app_.router.add_get("/drip.txt", _drip)
    app_.router.add_get("/bomb.txt", _bomb)
    app_.router.add_get("/stacked-bomb.txt", _stacked_bomb)
    for path in CHARSETS:
        app_.router.add_get(path, _charset)
    app_.router.add_get("/zstd.txt", _zstd)
    for coding in ("gzip", "deflate", "raw-deflate"):
        app_.router.add_get(f"/{coding}.md", _encoded(coding))
    app_.router.add_get("/private.md", _private)
    app_.router.add_get("/loop", _redirect("/loop"))
    app_.router.add_get("/slow", _slow)
    app_.router.add_get("/good.md", _good)
    app_.router.add_get("/to-bad-port", _to_bad_port)
    app_.router.add_get("/to-file", _redirect("file:///etc/passwd"))
    app_.router.add_get("/to-metadata", _redirect("http://169.254.169.254/latest/meta-data/"))
    # The same address as the resolver also reads it: decimal, and IPv4-mapped IPv6.
    app_.router.add_get("/to-metadata-decimal", _redirect("http://2852039166/latest/meta-data/"))
    mapped = "http://[::ffff:169.254.169.254]/latest/meta-data/"
    app_.router.add_get("/to-metadata-mapped", _redirect(mapped))
    runner_ = web.AppRunner(app_)
    await runner_.setup()
    tcp = web.TCPSite(runner_, "127.0.0.1", 0)
    await tcp.start()
    port = tcp._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}"
    await runner_.cleanup()


async def _fetch_all(settings: Settings, index: object, embedder, urls: list[str], **limits):  # type: ignore[no-untyped-def]
    ingest = settings.ingest.model_copy(update=limits)
    async with httpx.AsyncClient(timeout=ingest.url_timeout_s) as http:
        ingestor = Ingestor(index, embedder, ingest, http=http)  # type: ignore[arg-type]
        return await ingestor.ingest(urls, source="web")


async def test_a_slow_drip_url_is_cut_off_at_its_deadline(
    site: str, settings: Settings, index: object, embedder: CachedEmbedder
) -> None:
    started = time.monotonic()
    report = await _fetch_all(settings, index, embedder, [f"{site}/drip.txt"], url_deadline_s=1)
    assert time.monotonic() - started < DRIP_BYTES / 4  # the deadline, not the drip's end
    assert [(s.display, s.reason) for s in report.skipped] == [
        (f"{site}/drip.txt", "did not arrive whole within 1 s (ingest.url_deadline_s)")
    ]


async def test_hostile_urls_are_skipped_with_their_reasons(
    site: str, settings: Settings, index: object, embedder: CachedEmbedder
) -> None:
    paths = ("bomb.txt", "loop", "to-file", "to-metadata")
    urls = [f"{site}/{p}" for p in (*paths, "to-metadata-decimal", "to-metadata-mapped")]
    report = await _fetch_all(settings, index, embedder, urls, max_file_bytes=1_000_000)
    assert {s.display.rsplit("/", 1)[1]: s.reason for s in report.skipped} == {
        "bomb.txt": "over the limit of 1,000,000 bytes (ingest.max_file_bytes)",
        "loop": "more than 20 redirects",
        "to-file": "redirect to a file: URL refused",
        "to-metadata": "redirect to a link-local address (169.254.169.254) refused",
        "to-metadata-decimal": "redirect to a link-local address (2852039166) refused",
        "to-metadata-mapped": "redirect to a link-local address (::ffff:a9fe:a9fe) refused",
    }


async def test_compressed_bodies_are_inflated_within_the_limit_or_refused(
    site: str, settings: Settings, index: object, embedder: CachedEmbedder
) -> None:
    """gzip and deflate (with or without its zlib header) are read; a stack of codings or one
    we did not ask for is refused with its name, before anything is inflated."""
    names = ("stacked-bomb.txt", "zstd.txt", "gzip.md", "deflate.md", "raw-deflate.md")
    report = await _fetch_all(
        settings, index, embedder, [f"{site}/{n}" for n in names], max_file_bytes=1_000_000
    )
    assert {s.display.rsplit("/", 1)[1]: s.reason for s in report.skipped} == {
        "stacked-bomb.txt": "the body is compressed 3 times (gzip, gzip, gzip)",
        "zstd.txt": "the body is compressed as 'zstd', which is not read",
    }
    assert report.counts[Outcome.ADDED] == 3


async def test_a_page_in_another_charset_is_read_in_the_one_it_declares(
    site: str, settings: Settings, index, embedder: CachedEmbedder
) -> None:
    """The Content-Type's charset, or for HTML the page's own: each was skipped as "not
    valid UTF-8". A body that is UTF-8 stays UTF-8 whatever the server says; a charset no one
    knows, on a body that is not UTF-8, is still a skip."""
    report = await _fetch_all(settings, index, embedder, [site + path for path in CHARSETS])
    assert [(s.display, s.reason) for s in report.skipped] == [
        (f"{site}/bogus.txt", "not valid UTF-8 (byte 3)")
    ]
    texts = {
        hit.chunk.text
        for q in (
            "caf\u00e9 flat whites",
            "cr\u00e8me br\u00fbl\u00e9e",
            "na\u00efve tea",
            "pi\u00f1a colada",
        )
        for hit in await index.search(q, k=1)
    }
    for words in (
        "\u201cflat whites\u201d",
        "Cr\u00e8me br\u00fbl\u00e9e",
        "Na\u00efve tea",
        "Pi\u00f1a colada",
    ):
        assert any(words in text for text in texts), words


async def test_a_malformed_url_is_named_with_why_and_the_other_targets_are_indexed(
    site: str, settings: Settings, index: object, embedder: CachedEmbedder, tmp_path: Path
) -> None:
    (tmp_path / "a.md").write_text("# A\n\nAlpha.\n")
    malformed = ["http://127.0.0.1:99999/x", "http://[::1", "http://u:s3cr3t-pw@[::1"]
    good = [str(tmp_path / "a.md"), f"{site}/good.md"]
    report = await _fetch_all(settings, index, embedder, [*malformed, *good, f"{site}/to-bad-port"])
    assert report.counts[Outcome.ADDED] == 2
    assert [(m.display, m.reason) for m in report.missing] == [
        ("http://127.0.0.1:99999/x", "not a valid URL: port out of range 0-65535"),
        ("http://[::1", "not a valid URL: invalid IPv6 URL"),
        ("http://[::1", "not a valid URL: invalid IPv6 URL"),
    ]
    assert [(s.display, s.reason) for s in report.skipped] == [
        (
            f"{site}/to-bad-port",
            "not a valid URL: port out of range 0-65535 (http://127.0.0.1:99999/x)",
        )
    ]


async def test_a_timeout_says_which_limit_it_hit(
    site: str, settings: Settings, index: object, embedder: CachedEmbedder
) -> None:
    limit = SLOW_S / 4
    report = await _fetch_all(settings, index, embedder, [f"{site}/slow"], url_timeout_s=limit)
    assert [s.reason for s in report.skipped] == [
        f"can't fetch {site}/slow: read timed out after {limit:g} s (ingest.url_timeout_s)"
    ]


async def test_url_credentials_are_used_but_never_stored_shown_or_logged(
    site: str,
    settings: Settings,
    index: object,
    embedder: CachedEmbedder,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    # The bot keeps httpx's request lines out of INFO logs; here they are wanted, to show that
    # a library's own line about the request carries no password either.
    caplog.set_level(logging.INFO, logger="httpx")
    with_password = site.replace("http://", "http://user:s3cr3t-pw@") + "/private.md"
    report = await _fetch_all(settings, index, embedder, [with_password])
    assert report.counts[Outcome.ADDED] == 1
    records = await index.documents()  # type: ignore[attr-defined]
    assert [(r.doc_id, r.url) for r in records.values()] == [
        (f"{site}/private.md", f"{site}/private.md")
    ]
    assert "s3cr3t-pw" not in caplog.text
    assert caplog.text.count(f"{site}/private.md") >= 1  # the request was logged, redacted


async def _serve(app_: web.Application) -> tuple[web.AppRunner, str]:
    runner_ = web.AppRunner(app_)
    await runner_.setup()
    tcp = web.TCPSite(runner_, "127.0.0.1", 0)
    await tcp.start()
    return runner_, f"http://127.0.0.1:{tcp._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]


async def test_url_credentials_are_not_sent_after_a_redirect_to_another_port(
    settings: Settings, index: object, embedder: CachedEmbedder
) -> None:
    """Same host, other port (or scheme): another origin, which gets no password."""
    seen: list[str | None] = []

    async def other(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        return web.Response(text="# Other\n\nPublic.\n", content_type="text/markdown")

    other_app = web.Application()
    other_app.router.add_get("/page.md", other)
    other_runner, other_site = await _serve(other_app)
    first_app = web.Application()
    first_app.router.add_get("/hop", _redirect(f"{other_site}/page.md"))
    first_runner, first_site = await _serve(first_app)
    try:
        url = first_site.replace("http://", "http://user:s3cr3t-pw@") + "/hop"
        report = await _fetch_all(settings, index, embedder, [url])
    finally:
        await first_runner.cleanup()
        await other_runner.cleanup()
    assert report.counts[Outcome.ADDED] == 1
    assert seen == [None]


# ------------------------------------------------------------------------- the command line


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("BOT_CONFIG", str(REPO / "config.yaml"))
    return tmp_path


def test_a_missing_target_is_an_error_naming_it(env: Path) -> None:
    result = runner.invoke(app, ["ingest", str(env / "nonexistent")])
    assert result.exit_code == 1
    assert len(result.output.splitlines()) == 1  # the error alone: no "0 added" before it
    assert (
        f"error: nothing to ingest at {env / 'nonexistent'} (no such file, folder or URL)"
        in " ".join(result.output.split())
    )


def test_an_empty_target_is_an_error_not_the_current_folder(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (env / "here.md").write_text("# Here\n\nnot to be indexed by ''\n")
    monkeypatch.chdir(env)
    result = runner.invoke(app, ["ingest", ""])
    assert result.exit_code == 1
    assert "error: nothing to ingest at '' (empty path (for this folder, say '.'))" in (
        " ".join(result.output.split())
    )
    assert len(result.output.splitlines()) == 1  # the error alone: no "0 added" before it
    assert runner.invoke(app, ["remove", str(env / "here.md")]).exit_code == 1  # not indexed


def test_a_run_where_every_file_is_skipped_exits_1(env: Path) -> None:
    docs = env / "docs"
    docs.mkdir()
    (docs / "empty.md").write_text("")
    os.mkfifo(docs / "pipe.md")
    result = runner.invoke(app, ["ingest", str(docs)])
    assert result.exit_code == 1
    assert "error: nothing was indexed: all 2 file(s) were skipped (reasons above)" in (
        " ".join(result.output.split())
    )


def test_a_prune_that_only_deletes_succeeds_and_an_empty_folder_is_an_error(env: Path) -> None:
    docs = env / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nAlpha.\n")
    assert runner.invoke(app, ["ingest", str(docs)]).exit_code == 0
    (docs / "a.md").unlink()
    result = runner.invoke(app, ["ingest", str(docs), "--prune"])
    assert result.exit_code == 0, result.output
    assert "1 deleted" in result.output
    result = runner.invoke(app, ["ingest", str(docs)])
    assert result.exit_code == 1
    assert f"error: no supported files under {docs}" in " ".join(result.output.split())


def test_a_parse_past_its_deadline_is_skipped_whatever_the_format(tmp_path: Path) -> None:
    """`ingest.parse_timeout_s` bounds every parse, not only a PDF's: 10 MB of unclosed `<a`
    (linear, but seconds of work) is skipped at the deadline, and the rest indexed."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "slow.html").write_text("<title>T</title><p>x</p>" + "<a" * 5_000_000)
    (docs / "good.md").write_text("# Good\n\nThe kettle is in the kitchen.\n")
    done = run_bot(["ingest", str(docs)], tmp_path, BOT_INGEST__PARSE_TIMEOUT_S="1", COLUMNS="200")
    assert done.returncode == 0, done.stderr
    assert "parsing took longer than 1 s (ingest.parse_timeout_s)" in done.stdout + done.stderr
    assert "1 added, 1 skipped" in done.stdout


def test_ctrl_c_during_a_long_parse_ends_the_run_at_once(tmp_path: Path) -> None:
    """A parse runs where nothing waits for it: Ctrl-C in the middle of 38 MB of HTML (a
    minute of parsing) ends the run in seconds; it waited for the parse to finish (47 s)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "big.html").write_text("<title>T</title><p>x</p>" + "<a" * 19_000_000)
    env = {
        **os.environ,
        "BOT_STORAGE__DATA_DIR": str(tmp_path / "data"),
        "BOT_CONFIG": str(REPO / "config.yaml"),
        "BOT_INGEST__MAX_FILE_BYTES": "50000000",
        "BOT_INGEST__PARSE_TIMEOUT_S": "600",
    }
    process = subprocess.Popen(
        [str(BOT), "ingest", str(docs)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a terminal's
    )
    time.sleep(PARSING_BY_S)  # started, read the file, and parsing
    process.send_signal(signal.SIGINT)
    interrupted = time.monotonic()
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130
    assert err.strip().splitlines()[-1].startswith("interrupted;")
    assert time.monotonic() - interrupted < ENDS_WITHIN_S


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        pytest.param(0o000, "can't list: Permission denied", id="not-listable"),
        # `r--` without `x`: its names are listed, but no file in it can be looked at
        pytest.param(0o644, "can't read: Permission denied", id="listable-not-enterable"),
    ],
)
def test_prune_keeps_what_is_under_a_folder_it_could_not_read(
    tmp_path: Path, mode: int, said: str
) -> None:
    """A folder this user can't read ends nothing: skipped with why, the rest indexed, and
    `--prune` keeps what the index has from it (it deleted it as gone)."""
    prefix = unprivileged()
    docs = tmp_path / "docs"
    shut = docs / "shut"
    shut.mkdir(parents=True)
    (docs / "open.md").write_text("# Open\n\nThe kettle is in the kitchen.\n")
    (shut / "vault.md").write_text("# Vault\n\nThe spare keys hang behind the boiler.\n")
    assert run_bot(["ingest", str(docs)], tmp_path, prefix).returncode == 0
    shut.chmod(mode)
    try:
        pruned = run_bot(["ingest", str(docs), "--prune"], tmp_path, prefix, COLUMNS="200")
    finally:
        shut.chmod(0o755)
    assert pruned.returncode == 0, pruned.stderr
    assert "unexpected" not in pruned.stderr
    assert said in pruned.stdout + pruned.stderr
    assert "1 unchanged, 1 skipped;" in pruned.stdout
    assert "deleted" not in pruned.stdout
    found = run_bot(["search", "spare keys boiler", "--json"], tmp_path, prefix)
    assert json.loads(found.stdout)[0]["title"] == "Vault"


async def _ingested_unchecked(path: Path, label: str) -> None:
    """`path` ingested under `label` as a bot did before `--source` names were checked."""
    from bot.runtime import opened
    from core.config_loader import load_settings

    settings = load_settings(REPO / "config.yaml", environ=dict(os.environ))
    async with opened(settings) as rt:
        ingestor = Ingestor(rt.backend.index, rt.embedder, settings.ingest)
        assert (await ingestor.ingest([str(path)], source=label)).indexed == 1


@pytest.mark.parametrize("label", ["team/docs", "a b", "x" * 65, "\x1b[2Jdocs", ""])
def test_a_new_source_label_is_a_source_name(env: Path, label: str) -> None:
    (env / "a.md").write_text("# A\n\nAlpha.\n")
    result = runner.invoke(app, ["ingest", str(env / "a.md"), "--source", label])
    assert result.exit_code == 1
    assert result.output == (
        f"error: --source {label!r}: a source name is 1-64 letters, digits, '.', '_', '-'\n"
    )
    assert "\x1b" not in result.output
    assert (
        runner.invoke(app, ["ingest", str(env / "a.md"), "--source", "team.docs_2"]).exit_code == 0
    )


def test_a_label_an_older_bot_wrote_can_still_be_ingested_and_removed(env: Path) -> None:
    (env / "a.md").write_text("# A\n\nAlpha.\n")
    (env / "b.md").write_text("# B\n\nBravo.\n")
    asyncio.run(_ingested_unchecked(env / "a.md", "team/docs"))
    assert runner.invoke(app, ["ingest", str(env / "b.md"), "--source", ".notes"]).exit_code == 0
    again = runner.invoke(app, ["ingest", str(env / "a.md"), "--source", "team/docs"])
    assert again.exit_code == 0, again.output
    assert "1 unchanged" in again.output
    result = runner.invoke(app, ["remove", "team/docs", ".notes"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "team/docs (source): 1 document(s), 1 chunk(s) removed",
        ".notes (source): 1 document(s), 1 chunk(s) removed",
    ]


def test_remove_undoes_an_ingest_by_path_url_or_source(env: Path) -> None:
    docs = env / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "a.md").write_text("# A\n\nAlpha.\n")
    (docs / "sub" / "b.md").write_text("# B\n\nBravo.\n")
    (env / "c.md").write_text("# C\n\nCharlie.\n")
    assert runner.invoke(app, ["ingest", str(docs)]).exit_code == 0
    assert runner.invoke(app, ["ingest", str(env / "c.md"), "--source", "extra"]).exit_code == 0

    result = runner.invoke(app, ["remove", str(docs / "sub"), "extra"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines == [
        f"{docs / 'sub'} (path): 1 document(s), 1 chunk(s) removed",
        "extra (source): 1 document(s), 1 chunk(s) removed",
    ]
    a_link = (docs / "a.md").resolve().as_uri()  # its citation link (no --base-url)
    result = runner.invoke(app, ["remove", a_link, "nosuch"])
    assert result.exit_code == 1
    assert result.output.splitlines() == [  # what matched nothing is named once: in the error
        f"{a_link} (URL): 1 document(s), 1 chunk(s) removed",
        "error: nothing in the index matched nosuch (a source label, a URL or an ingested path;"
        " `bot doctor` lists the source labels)",
    ]
    assert runner.invoke(app, ["ingest", str(docs), "--source", "handbook"]).exit_code == 0
    result = runner.invoke(app, ["remove", "handbook"])
    assert result.exit_code == 0
    assert result.output == "handbook (source): 2 document(s), 2 chunk(s) removed\n"


def test_a_moved_folder_named_like_the_default_label_removes_nothing_else(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`bot remove docs` after the folder moved (or from another directory) read `docs` as the
    label every ingest without --source gets, and removed every such ingest: another folder's
    documents too, without a word."""
    monkeypatch.chdir(env)
    for folder, text in (("docs", "Alpha."), ("handbook", "Bravo.")):
        (env / folder).mkdir()
        (env / folder / "a.md").write_text(f"# A\n\n{text}\n")
        assert runner.invoke(app, ["ingest", folder]).exit_code == 0
    (env / "docs").rename(env / "docs.moved")
    result = runner.invoke(app, ["remove", "docs"])
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        "error: docs is no path anything was ingested from, and it is also a source label (2 "
        "document(s), everything ingested without --source): to remove that label's documents, "
        "run `bot remove --source docs`"
    ]
    (env / "notes").mkdir()  # a folder of that name exists, nothing was ingested from it
    assert runner.invoke(app, ["ingest", "handbook", "--source", "notes"]).exit_code == 0
    there = runner.invoke(app, ["remove", "notes"])
    assert there.exit_code == 1
    assert there.output.startswith("error: notes exists here, and it is also a source label")
    assert "handbook/a.md" in runner.invoke(app, ["search", "Bravo", "--json"]).output
    labelled = runner.invoke(app, ["remove", "--source", "notes", "--source", "docs"])
    assert labelled.exit_code == 0, labelled.output
    assert labelled.output.splitlines() == [
        "notes (source): 1 document(s), 1 chunk(s) removed",
        "docs (source): 1 document(s), 1 chunk(s) removed",
    ]
    nothing = runner.invoke(app, ["remove"])
    assert nothing.exit_code == 1
    assert nothing.output.startswith("error: name what to remove")


def test_remove_never_shows_a_urls_password(env: Path) -> None:
    result = runner.invoke(app, ["remove", "http://alice:s3cr3tpw@host/good", "handbok"])
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        "error: nothing in the index matched http://host/good, handbok (a source label, a URL or"
        " an ingested path; `bot doctor` lists the source labels)"
    ]
    malformed = runner.invoke(app, ["remove", "http://[::1"])
    assert malformed.exit_code == 1
    assert malformed.output.startswith("error: nothing in the index matched http://[::1 ")


def test_a_malformed_url_on_the_command_line_is_one_line_and_the_rest_is_indexed(
    env: Path,
) -> None:
    (env / "a.md").write_text("# A\n\nAlpha.\n")
    result = runner.invoke(app, ["ingest", str(env / "a.md"), "http://127.0.0.1:99999/x"])
    assert result.exit_code == 1
    assert "1 added" in result.output
    assert result.output.splitlines()[-1] == (
        "error: nothing to ingest at http://127.0.0.1:99999/x (not a valid URL: port out of"
        " range 0-65535); the other targets were ingested"
    )


async def test_a_second_ingest_is_refused_while_one_holds_the_lock(env: Path) -> None:
    docs = env / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nAlpha.\n")
    settings = _cli_settings(env)
    locks = SqliteRunLocks(settings.state_path, settings.search.busy_timeout_ms)
    assert await locks.claim("ingest", "otherhost:42", settings.ingest.lock_ttl_s)
    try:
        result = await asyncio.to_thread(runner.invoke, app, ["ingest", str(docs)])
        assert result.exit_code == 1
        text = " ".join(result.output.split())
        assert "error: another ingest is running (by otherhost:42, last renewed " in text
        assert " UTC); try again when it has finished (if it was killed, its lock lapses " in text
        assert await locks.held("ingest") is not None  # not taken over, not released
    finally:
        await locks.release("ingest", "otherhost:42")
        await locks.close()
    first = await asyncio.to_thread(runner.invoke, app, ["ingest", str(docs)])
    again = await asyncio.to_thread(runner.invoke, app, ["ingest", str(docs)])
    assert (first.exit_code, again.exit_code) == (0, 0)  # each released its lock


def _cli_settings(env: Path) -> Settings:
    from core.config_loader import load_settings

    return load_settings(REPO / "config.yaml", environ={"BOT_STORAGE__DATA_DIR": str(env / "data")})


async def test_a_lock_left_by_a_killed_ingest_on_this_machine_is_taken_over(env: Path) -> None:
    """A killed ingest can't release its lock; the re-run that resumes it must not wait hours
    for the expiry. A live holder on this machine still keeps it."""
    docs = env / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nAlpha.\n")
    settings = _cli_settings(env)
    locks = SqliteRunLocks(settings.state_path, settings.search.busy_timeout_ms)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    here = socket.gethostname()
    try:
        assert await locks.claim("ingest", f"{here}:{os.getppid()}", settings.ingest.lock_ttl_s)
        refused = await asyncio.to_thread(runner.invoke, app, ["ingest", str(docs)])
        assert refused.exit_code == 1
        assert f"(by {here}:{os.getppid()}, last renewed " in " ".join(refused.output.split())
        await locks.release("ingest", f"{here}:{os.getppid()}")

        assert await locks.claim("ingest", f"{here}:{dead.pid}", settings.ingest.lock_ttl_s)
        resumed = await asyncio.to_thread(runner.invoke, app, ["ingest", str(docs)])
        assert resumed.exit_code == 0, resumed.output
        assert await locks.held("ingest") is None  # taken over, then released
    finally:
        await locks.close()
