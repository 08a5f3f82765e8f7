from __future__ import annotations

import asyncio
import os
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from core.backends.sqlite.index import SqliteIndex
from core.config import Settings
from core.domain.documents import Outcome, SearchMode
from core.ingest.pipeline import Ingestor
from core.search.embedder import CachedEmbedder
from tests.conftest import Index
from tests.fakes.static_site import StaticSite
from tests.office_maker import SlideSpec, make_pptx, make_xlsx
from tests.pdf_maker import make_pdf
from tests.word_maker import make_docx


def _corpus(root: Path) -> Path:
    docs = root / "docs"
    (docs / "guide").mkdir(parents=True)
    (docs / "guide" / "setup.md").write_text(
        "# Setup\n\nIntro.\n\n## Install on Linux\n\nRun apt-get install docbot.\n\n"
        "## Tokens {#tokens}\n\nSet SLACK_BOT_TOKEN in the environment.\n"
    )
    (docs / "faq.html").write_text(
        "<html><head><title>FAQ</title></head><body><main><h1>FAQ</h1>"
        "<h2 id='refunds'>Refunds</h2><p>Refunds take five business days.</p></main></body></html>"
    )
    (docs / "notes.txt").write_text("Office hours are Tuesdays at 3pm.\n")
    (docs / "report.pdf").write_bytes(make_pdf([["Quarterly revenue grew twelve percent."]]))
    (docs / ".hidden.md").write_text("# Secret\n\nnever indexed")
    return docs


async def test_folder_ingest_builds_deep_links(tmp_path: Path, ingestor: Ingestor, index) -> None:
    docs = _corpus(tmp_path)
    report = await ingestor.ingest([str(docs)], source="kb", base_url="https://kb.example/docs")
    assert report.counts[Outcome.ADDED] == 4
    assert report.skipped == []
    hits = await index.search("how long do refunds take", k=1)
    assert hits[0].chunk.url == "https://kb.example/docs/faq.html#refunds"
    assert hits[0].chunk.title == "FAQ"
    assert hits[0].chunk.heading == "Refunds"
    hits = await index.search("SLACK_BOT_TOKEN environment", k=1)
    assert hits[0].chunk.url == "https://kb.example/docs/guide/setup.md#tokens"
    hits = await index.search("quarterly revenue", k=1)
    assert hits[0].chunk.url == "https://kb.example/docs/report.pdf#page=1"
    assert not await index.search("never indexed", k=5, mode=SearchMode.BM25)


async def test_office_files_in_a_folder_are_indexed_by_heading_slide_and_sheet(
    tmp_path: Path, ingestor: Ingestor, index
) -> None:
    docs = tmp_path / "policies"
    docs.mkdir()
    (docs / "Travel policy.docx").write_bytes(
        make_docx(
            [
                ("Title", "Travel policy"),
                ("Heading 1", "Booking"),
                ("Normal", "Book flights through the travel desk."),
                ("Heading 1", "Per diem"),
                ("Normal", "The daily allowance abroad is 60 euros."),
            ]
        )
    )
    welcome = SlideSpec(title="Welcome", texts=["Your first week."])
    access = SlideSpec(title="Access", texts=["Request VPN access from the IT portal."])
    (docs / "Onboarding.pptx").write_bytes(make_pptx([welcome, access]))
    rota = {"Rota": [["Week", "Engineer"], ["48", "Grace Hopper"]]}
    (docs / "On-call.xlsx").write_bytes(make_xlsx(rota))
    report = await ingestor.ingest([str(docs)], source="kb", base_url="https://kb.example/pol")
    assert report.counts[Outcome.ADDED] == 3
    hit = (await index.search("daily allowance abroad", k=1))[0]
    assert (hit.chunk.title, hit.chunk.heading) == ("Travel policy", "Per diem")
    assert hit.chunk.url == "https://kb.example/pol/Travel%20policy.docx"
    hit = (await index.search("VPN access portal", k=1))[0]
    assert (hit.chunk.title, hit.chunk.heading) == ("Welcome", "Slide 2: Access")
    assert hit.chunk.url == "https://kb.example/pol/Onboarding.pptx"
    hit = (await index.search("Grace Hopper engineer week", k=1))[0]
    assert (hit.chunk.heading, hit.chunk.url) == ("Rota", "https://kb.example/pol/On-call.xlsx")
    assert hit.chunk.text == "Week: 48 | Engineer: Grace Hopper"


async def test_without_base_url_links_are_file_uris(tmp_path: Path, ingestor: Ingestor, index):
    docs = _corpus(tmp_path)
    await ingestor.ingest([str(docs / "notes.txt")], source="kb")
    hits = await index.search("office hours", k=1)
    assert hits[0].chunk.url == (docs / "notes.txt").resolve().as_uri()
    assert hits[0].chunk.title == "Notes"


async def test_reingest_is_idempotent_and_updates_only_changes(
    tmp_path: Path, ingestor: Ingestor, index: Index, embedder: CachedEmbedder
) -> None:
    docs = _corpus(tmp_path)
    await ingestor.ingest([str(docs)], source="kb")
    before = await index.stats()
    computed = embedder.computed

    again = await ingestor.ingest([str(docs)], source="kb")
    assert again.counts[Outcome.UNCHANGED] == 4
    assert again.counts[Outcome.ADDED] == again.counts[Outcome.UPDATED] == 0
    assert embedder.computed == computed  # nothing re-embedded
    assert (await index.stats()).chunks == before.chunks

    (docs / "notes.txt").write_text("Office hours moved to Thursdays at 4pm.\n")
    changed = await ingestor.ingest([str(docs)], source="kb")
    assert changed.counts[Outcome.UPDATED] == 1
    assert changed.counts[Outcome.UNCHANGED] == 3
    assert embedder.computed == computed + 1
    hits = await index.search("office hours", k=1)
    assert "Thursdays" in hits[0].chunk.text
    assert not await index.search("Tuesdays", k=3, mode=SearchMode.BM25)


async def test_prune_deletes_only_removed_documents_in_scope(
    tmp_path: Path, ingestor: Ingestor, index: Index
) -> None:
    docs = _corpus(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.md").write_text("# Keep\n\nThis lives in another folder.\n")
    await ingestor.ingest([str(docs), str(other)], source="kb")
    (docs / "faq.html").unlink()

    without = await ingestor.ingest([str(docs)], source="kb")
    assert without.counts[Outcome.DELETED] == 0
    assert len(await index.documents()) == 5

    pruned = await ingestor.ingest([str(docs)], source="kb", prune=True)
    assert pruned.counts[Outcome.DELETED] == 1
    remaining = {Path(d.url).name for d in (await index.documents()).values()}
    assert "faq.html" not in remaining
    assert "keep.md" in remaining
    assert not await index.search("refunds", k=3, mode=SearchMode.BM25)


async def test_bad_inputs_are_skipped_with_reasons(
    tmp_path: Path, settings: Settings, index: Index, embedder: CachedEmbedder
) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "good.md").write_text("# Good\n\nThis one is fine.\n")
    (bad / "empty.md").write_text("")
    (bad / "binary.txt").write_bytes(b"\x00\x01\x02garbage")
    (bad / "latin1.md").write_bytes(b"caf\xe9")
    (bad / "image.png").write_bytes(b"\x89PNG\r\n")
    (bad / "minutes.DOC").write_bytes(b"\xd0\xcf\x11\xe0 Word 97")
    (bad / "budget.xls").write_bytes(b"\xd0\xcf\x11\xe0 Excel 97")
    (bad / "big.txt").write_text("x" * 2_000)
    (bad / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    locked = bad / "locked.md"
    locked.write_text("# Locked\n\ncan't read me")
    locked.chmod(0)
    small = settings.ingest.model_copy(update={"max_file_bytes": 1_000})
    ingestor = Ingestor(index, embedder, small)
    try:
        report = await ingestor.ingest([str(bad), str(tmp_path / "missing")], source="kb")
    finally:
        locked.chmod(0o644)
    reasons = {Path(s.display).name: s.reason for s in report.skipped}
    assert report.counts[Outcome.ADDED] == (1 if os.geteuid() != 0 else 2)  # root reads anything
    assert reasons["empty.md"] == "empty file"
    assert reasons["binary.txt"].startswith("binary content")
    assert reasons["latin1.md"].startswith("not valid UTF-8")
    assert reasons["image.png"] == "unsupported file type '.png'"
    assert reasons["minutes.DOC"] == "unsupported file type '.DOC' (Word 97-2003: save it as .docx)"
    assert reasons["budget.xls"] == (
        "unsupported file type '.xls' (Excel 97-2003: save it as .xlsx)"
    )
    assert "over the limit of 1,000" in reasons["big.txt"]
    assert "PDF" in reasons["broken.pdf"]
    assert [(Path(m.display).name, m.reason) for m in report.missing] == [
        ("missing", "no such file, folder or URL")
    ]
    if os.geteuid() != 0:
        assert reasons["locked.md"].startswith("can't read")


@pytest.fixture
def site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), StaticSite)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


async def test_urls_are_fetched_and_linked(site: str, settings: Settings, index, embedder) -> None:
    async with httpx.AsyncClient(timeout=5) as http:
        ingestor = Ingestor(index, embedder, settings.ingest, http=http)
        report = await ingestor.ingest(
            [f"{site}/guide.html", f"{site}/notes.md#ignored", f"{site}/image", f"{site}/gone"],
            source="web",
        )
    assert report.counts[Outcome.ADDED] == 2
    reasons = {s.display.rsplit("/", 1)[1]: s.reason for s in report.skipped}
    assert reasons == {
        "image": "unsupported content type 'image/png'",
        "gone": f"HTTP 404 from {site}/gone",
    }
    hits = await index.search("Procfile web line", k=1)
    assert hits[0].chunk.url == f"{site}/guide.html#deploy"
    hits = await index.search("vectors cached", k=1)
    assert hits[0].chunk.url == f"{site}/notes.md#caching"


async def test_search_during_ingest_sees_whole_documents(
    tmp_path: Path, ingestor: Ingestor, index: Index
) -> None:
    """Readers run while the writer commits: no errors, and never half a document."""
    if not isinstance(index, SqliteIndex):
        pytest.skip(
            "SQLite-only guarantee: Elasticsearch has no multi-document transactions, so a "
            "document's chunks become searchable at a refresh, not atomically"
        )
    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(60):
        parts = (f"## Part {j}\n\nTopic {i} detail {j} about widgets." for j in range(4))
        sections = "\n\n".join(parts)
        (folder / f"doc{i:02d}.md").write_text(f"# Doc {i}\n\n{sections}\n")
    stop = threading.Event()
    errors: list[BaseException] = []
    observations: list[int] = []

    def reader() -> None:
        async def loop() -> None:
            while not stop.is_set():
                # One BM25 statement reads one snapshot; k covers every chunk of every doc.
                hits = await index.search("widgets", k=1000, mode=SearchMode.BM25)
                per_doc = Counter(h.chunk.doc_id for h in hits)
                observations.extend(per_doc.values())

        try:
            asyncio.run(loop())
        except BaseException as exc:  # noqa: BLE001 (collected and asserted on below)
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        report = await ingestor.ingest([str(folder)], source="kb")
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert errors == []
    assert report.counts[Outcome.ADDED] == 60
    assert observations, "the readers should have seen documents while the ingest ran"
    assert set(observations) == {4}  # every visible document had all four of its chunks
