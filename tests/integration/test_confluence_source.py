"""Confluence sources against the local emulator of both APIs (Cloud REST v2 and Data Center
REST): three spaces, 500 pages, listings over many cursors, one page deleted and one edited
between syncs, rate limits, credentials from the environment."""

from __future__ import annotations

import base64
import dataclasses
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp.test_utils import TestServer

from core.config import SourceSettings
from core.domain.documents import Outcome
from core.errors import SourceUnavailable
from core.ingest.confluence import heading_anchor, storage_to_html
from core.ingest.pipeline import Ingestor
from core.ingest.sync import SourceSyncer
from tests.fakes.confluence import SERVED_PAGE_SIZE, FakeAttachment, FakeConfluence, FakePage
from tests.fakes.faults import RefusingEmbedder
from tests.office_maker import SlideSpec, make_pptx, make_xlsx
from tests.pdf_maker import make_pdf
from tests.word_maker import make_docx

SPACES = {"ENG": 200, "OPS": 150, "HR": 150}
TOKEN = "conf-token-123"
EMAIL = "bot@acme.example"
LINEAR_S = 5  # 10,000 unclosed tags: 0.1 s read linearly, 30 s by html.parser alone


def authorization(flavour: str) -> str:
    if flavour == "datacenter":
        return f"Bearer {TOKEN}"
    return "Basic " + base64.b64encode(f"{EMAIL}:{TOKEN}".encode()).decode()


@pytest.fixture(params=["cloud", "datacenter"])
async def confluence(request: pytest.FixtureRequest) -> AsyncIterator[FakeConfluence]:
    fake = FakeConfluence.seeded(request.param, authorization(request.param), SPACES)
    server = TestServer(fake.app(), host="127.0.0.1")
    await server.start_server()
    fake.base = str(server.make_url("")).rstrip("/")
    yield fake
    await server.close()


def source(fake: FakeConfluence, **options: object) -> SourceSettings:
    base = fake.base + "/wiki" if fake.flavour == "cloud" else fake.base
    return SourceSettings.model_validate(
        {
            "type": "confluence",
            "location": [base],
            "spaces": list(SPACES),
            "flavour": fake.flavour,
            "username": EMAIL,
            "token_env": "CONFLUENCE_TOKEN",
            **options,
        }
    )


@pytest.fixture
async def syncer(  # type: ignore[no-untyped-def]
    ingestor: Ingestor, index, backend, settings, tmp_path: Path, monkeypatch
) -> AsyncIterator[SourceSyncer]:
    monkeypatch.setenv("CONFLUENCE_TOKEN", TOKEN)
    fast = settings.ingest.model_copy(
        update={"confluence": settings.ingest.confluence.model_copy(update={"max_wait_s": 0.05})}
    )
    async with httpx.AsyncClient() as http:
        yield SourceSyncer(ingestor, index, backend.locks, http, fast, tmp_path / "data")


def tuned(syncer: SourceSyncer, **confluence: object) -> SourceSyncer:
    """The syncer with other `ingest.confluence` settings."""
    settings = syncer.settings
    changed = settings.confluence.model_copy(update=confluence)
    return dataclasses.replace(syncer, settings=settings.model_copy(update={"confluence": changed}))


def listings(fake: FakeConfluence) -> int:
    """Listing requests a full walk of the spaces takes, at the emulator's page size."""
    return sum(-(-count // SERVED_PAGE_SIZE) for count in SPACES.values())


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_three_spaces_of_500_pages_then_only_the_edited_page_is_read(
    confluence: FakeConfluence, syncer: SourceSyncer, index
) -> None:
    first = await syncer.sync("wiki", source(confluence))
    assert first.counts[Outcome.ADDED] == 500
    assert confluence.requests["page"] == 500
    assert confluence.requests["listing"] == listings(confluence)  # every cursor followed once
    attachments = [s for s in first.skipped if s.reason.startswith("an attachment")]
    assert len(attachments) == 500
    assert attachments[0].reason == "an attachment of a type not read (.png)"
    assert "ENG: ENG page 0 / diagram-0.png" in {s.display for s in attachments}

    edited = next(p for p in confluence.pages.values() if p.title == "OPS page 7")
    edited.body = edited.body.replace("restart the agent", "page the platform team")
    edited.version += 1
    deleted = next(p for p in confluence.pages.values() if p.title == "HR page 3")
    del confluence.pages[deleted.page_id]
    confluence.requests.clear()

    second = await syncer.sync("wiki", source(confluence))
    assert confluence.requests["page"] == 1  # the edited page's body, nothing else
    assert confluence.requests["listing"] == listings(confluence)
    assert second.counts[Outcome.UPDATED] == 1
    assert second.counts[Outcome.DELETED] == 1
    assert second.counts[Outcome.UNCHANGED] == 498
    hits = await index.search("OPS-7 fails page the platform team", k=1)
    assert "page the platform team" in hits[0].chunk.text
    setup = await index.search("make setup-7 standard profile OPS-7", k=1)
    assert "make setup-7" in setup[0].chunk.text  # the code macro's body is text
    assert "bash" not in setup[0].chunk.text  # its language parameter is not
    anchor = heading_anchor(confluence.flavour, "OPS page 7", "Troubleshooting topic 7")
    assert hits[0].chunk.url.endswith("#" + anchor)
    assert hits[0].chunk.url.startswith(confluence.base)
    assert not any(d.endswith("/" + deleted.page_id) for d in await index.documents())


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_a_rate_limited_sync_waits_and_finishes(
    confluence: FakeConfluence, syncer: SourceSyncer
) -> None:
    confluence.pages = {k: v for k, v in list(confluence.pages.items())[:30]}
    confluence.throttle = 3
    confluence.retry_after = "0"
    report = await syncer.sync("wiki", source(confluence, spaces=["ENG"]))
    assert confluence.requests["429"] == 3
    assert report.counts[Outcome.ADDED] == 30


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_a_sync_throttled_throughout_ends_once_its_waiting_is_spent(
    confluence: FakeConfluence, syncer: SourceSyncer, index
) -> None:
    """Each page's five retries, up to a minute apart, had no total: a space of 500 throttled
    pages would have taken days. Past the sync's budget a throttled page fails at once and
    keeps its indexed copy."""
    confluence.pages = {k: v for k, v in list(confluence.pages.items())[:30]}
    # 0.05 s a retry: 6 retries in all
    syncer = tuned(syncer, max_wait_s=0.05, max_total_wait_s=0.3)
    assert (await syncer.sync("wiki", source(confluence, spaces=["ENG"]))).counts[
        Outcome.ADDED
    ] == 30
    for page in confluence.pages.values():
        page.version += 1
    confluence.broken = dict.fromkeys(list(confluence.pages)[1:], 429)  # all but one
    confluence.requests.clear()
    throttled = await syncer.sync("wiki", source(confluence, spaces=["ENG"]))
    # The first throttled page's 5 retries, the second's 1, then one try each: not 29 x 6.
    assert confluence.requests["page"] == 6 + 2 + 27 + 1
    assert throttled.counts[Outcome.UNCHANGED] == 1  # the page not throttled: read, same text
    assert throttled.counts[Outcome.DELETED] == 0
    reasons = [s.reason for s in throttled.skipped if "attachment" not in s.reason]
    assert len(reasons) == 29
    assert sum("0.3 s of waiting for retries are spent" in r for r in reasons) == 28
    assert len(await index.documents()) == 30  # every page keeps its indexed copy


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_a_page_that_fails_is_that_pages_failure_not_the_syncs(
    confluence: FakeConfluence, syncer: SourceSyncer, index
) -> None:
    confluence.pages = {k: v for k, v in list(confluence.pages.items())[:5]}
    first = await syncer.sync("wiki", source(confluence, spaces=["ENG"]))
    assert first.counts[Outcome.ADDED] == 5
    down, garbled, fine = list(confluence.pages.values())[:3]
    for page in (down, garbled, fine):
        page.version += 1
        page.body = page.body.replace("restart the agent", "page the platform team")
    confluence.broken = {down.page_id: 500, garbled.page_id: "not json"}
    second = await syncer.sync("wiki", source(confluence, spaces=["ENG"]))
    assert second.counts[Outcome.UPDATED] == 1  # the fine page
    reasons = {s.display: s.reason for s in second.skipped if "attachment" not in s.reason}
    assert reasons[f"ENG: {garbled.title}"] == "Confluence answered with something other than JSON"
    assert reasons[f"ENG: {down.title}"].startswith("Confluence ")
    assert second.counts[Outcome.DELETED] == 0  # the one down for now keeps its indexed copy
    assert any(d.endswith("/" + down.page_id) for d in await index.documents())
    confluence.broken = {}  # back up: the next sync reads what it could not, and only that
    confluence.requests.clear()
    third = await syncer.sync("wiki", source(confluence, spaces=["ENG"]))
    assert third.counts[Outcome.UPDATED] == 2  # the two it could not read, and only those
    assert confluence.requests["page"] == 2


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_a_page_whose_body_does_not_decompress_is_skipped_and_the_rest_synced(
    confluence: FakeConfluence, syncer: SourceSyncer
) -> None:
    """httpx's DecodingError was no failure the sync knew: one garbled page ended it."""
    confluence.pages = {k: v for k, v in list(confluence.pages.items())[:3]}
    garbled = next(iter(confluence.pages.values()))
    confluence.broken = {garbled.page_id: "bad gzip"}
    report = await syncer.sync("wiki", source(confluence, spaces=["ENG"]))
    assert report.counts[Outcome.ADDED] == 2
    reasons = {s.display: s.reason for s in report.skipped if "attachment" not in s.reason}
    assert reasons == {
        f"ENG: {garbled.title}": "Confluence sent a response that can't be read (the body is "
        "not valid gzip: Error -3 while decompressing data: unknown compression method)"
    }


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_refused_credentials_and_unknown_spaces_fail_in_one_line(
    confluence: FakeConfluence, syncer: SourceSyncer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONFLUENCE_TOKEN", "wrong")
    with pytest.raises(SourceUnavailable, match=r"refused the credentials \(HTTP 401\)"):
        await syncer.sync("wiki", source(confluence))
    monkeypatch.setenv("CONFLUENCE_TOKEN", TOKEN)
    # Data Center too: it lists an unknown key as a space without pages, which pruned the
    # space whose key was mistyped (asked for each key apart now).
    with pytest.raises(SourceUnavailable, match="no space NOPE"):
        await syncer.sync("wiki", source(confluence, spaces=["ENG", "NOPE"]))
    confluence.throttle = 100  # never lets up: the retries run out
    with pytest.raises(SourceUnavailable, match="Confluence answered HTTP 429"):
        await syncer.sync("wiki", source(confluence))


def test_storage_format_gets_confluences_heading_ids_and_images_alt_text_no_parameters() -> None:
    storage = (
        "<h1>Deploy steps</h1><p>Intro.</p>"
        '<ac:structured-macro ac:name="code"><ac:parameter ac:name="language">bash'
        "</ac:parameter><ac:plain-text-body><![CDATA[make deploy]]></ac:plain-text-body>"
        '</ac:structured-macro><ac:link><ri:attachment ri:filename="runbook.pdf"/></ac:link>'
        "<h2>Deploy steps</h2><p>Again.</p>"
        '<ac:image ac:alt="Deploy pipeline: build, test, canary, all hosts">'
        '<ri:attachment ri:filename="pipeline.png"/></ac:image>'
    )
    html = storage_to_html(storage, "cloud", "Release <guide>")
    assert 'id="Deploy-steps"' in html
    assert 'id="Deploy-steps.1"' in html
    assert "bash" not in html  # the language parameter is gone
    assert "make deploy" in html
    assert "<title>Release &lt;guide></title>" in html
    assert '<img alt="Deploy pipeline: build, test, canary, all hosts"/>' in html
    anchor = heading_anchor("datacenter", "Release guide", "Deploy steps")
    assert anchor == "Releaseguide-Deploysteps"


def test_storage_format_with_markup_that_never_closes_is_read_in_linear_time() -> None:
    storage = "<h2>Intro</h2><p>Kept.</p>" + "<ac:structured-macro " * 10_000
    started = time.monotonic()
    html = storage_to_html(storage, "cloud", "Broken page")
    assert time.monotonic() - started < LINEAR_S
    assert '<h2 id="Intro">Intro</h2><p>Kept.</p>&lt;ac:structured-macro' in html


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_a_hostile_confluence_cannot_point_links_or_listings_elsewhere(
    confluence: FakeConfluence, syncer: SourceSyncer, index, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Links a reader follows stay on the site; a body over the size limit is skipped with its
    reason; a listing's next page on another site fails the sync in one line."""
    confluence.pages = {k: v for k, v in list(confluence.pages.items())[:3]}
    first, second, third = confluence.pages.values()
    second.body = "<p>" + "x" * 2_000 + "</p>"
    attribute = "_cloud_result" if confluence.flavour == "cloud" else "_dc_result"
    original = getattr(confluence, attribute)

    def hostile(page, *, body):  # type: ignore[no-untyped-def]
        result = original(page, body=body)
        if page is first:
            result["_links"]["webui"] = "javascript:alert(1)"
        if page is third:
            result["_links"]["webui"] = "//evil.example/phish"
        return result

    monkeypatch.setattr(confluence, attribute, hostile)
    small = syncer.settings.model_copy(update={"max_file_bytes": 1_000})
    report = await dataclasses.replace(syncer, settings=small).sync(
        "wiki", source(confluence, spaces=["ENG"])
    )
    skipped = {s.display: s.reason for s in report.skipped}
    assert skipped[f"ENG: {second.title}"].startswith("over the limit of 1,000 bytes")
    links = {d.url for d in (await index.documents()).values()}
    assert len(links) == 2
    for link in links:
        assert link.startswith(confluence.base + "/")
        assert "javascript" not in link
        assert "evil" not in link

    confluence.next_link = "https://evil.example/wiki/api/v2/spaces/1/pages?cursor=x"
    with pytest.raises(SourceUnavailable, match="next page at another site"):
        await syncer.sync("wiki", source(confluence, spaces=["ENG"]))


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_a_listing_whose_next_page_loops_back_fails_at_once(
    confluence: FakeConfluence, syncer: SourceSyncer, index
) -> None:
    """Each listing's `next` is the same page: found on its second request, not after
    max_listing_pages (10,000) of them, and the index keeps what it had."""
    confluence.pages = {k: v for k, v in list(confluence.pages.items())[:3]}
    await syncer.sync("wiki", source(confluence, spaces=["ENG"]))
    if confluence.flavour == "cloud":
        cursor = base64.urlsafe_b64encode(b'{"o": 0}').decode()  # the first page's, again
        space = confluence.space_ids["ENG"]
        confluence.next_link = f"/wiki/api/v2/spaces/{space}/pages?cursor={cursor}"
    else:
        confluence.next_link = "/rest/api/content?spaceKey=ENG&type=page&start=0"
    confluence.requests.clear()
    with pytest.raises(SourceUnavailable, match="came back to a page it had sent already"):
        await syncer.sync("wiki", source(confluence, spaces=["ENG"]))
    assert confluence.requests["listing"] <= 3
    assert len(await index.documents()) == 3


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_page_ids_are_asked_for_as_listed(
    confluence: FakeConfluence, syncer: SourceSyncer
) -> None:
    """A listed id is one path segment: with a `#` it asked for another page, with a control
    character httpx refused the URL and the whole sync ended with a traceback."""
    pages = list(confluence.pages.values())[:3]
    for page, odd in zip(pages, ("4242#top", "4243\n", "4244?x=1"), strict=True):
        page.page_id = odd
    confluence.pages = {page.page_id: page for page in pages}
    report = await syncer.sync("wiki", source(confluence, spaces=["ENG"]))
    assert report.counts[Outcome.ADDED] == 3


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_an_edit_that_could_not_be_indexed_is_read_again_next_time(
    confluence: FakeConfluence, syncer: SourceSyncer, index, embedder
) -> None:
    """The edited page's body was read but its embedding failed: its new version is not
    remembered, so the next sync reads it again instead of keeping the old copy for good."""
    confluence.pages = {k: v for k, v in list(confluence.pages.items())[:5]}
    await syncer.sync("wiki", source(confluence, spaces=["ENG"]))
    edited = next(iter(confluence.pages.values()))
    edited.body = edited.body.replace("restart the agent", "page the platform team")
    edited.version += 1
    refusing = RefusingEmbedder(embedder, "page the platform team")
    flaky = dataclasses.replace(syncer, ingestor=Ingestor(index, refusing, syncer.settings))
    with pytest.raises(SourceUnavailable, match=f"could not be indexed \\(ENG: {edited.title}:"):
        await flaky.sync("wiki", source(confluence, spaces=["ENG"]))

    refusing.down = False
    confluence.requests.clear()
    again = await flaky.sync("wiki", source(confluence, spaces=["ENG"]))
    assert confluence.requests["page"] == 1
    assert again.counts[Outcome.UPDATED] == 1
    hits = await index.search(f"{edited.title} fails page the platform team", k=1)
    assert "page the platform team" in hits[0].chunk.text


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_a_space_taken_out_of_the_source_is_pruned(
    confluence: FakeConfluence, syncer: SourceSyncer, index
) -> None:
    """The pages of a space no longer in `spaces:` are not left in the index for good,
    answering with the source's label; a sync that fails keeps them."""
    confluence.pages = {
        k: v for k, v in confluence.pages.items() if v.title.split(" page ")[1] in ("0", "1")
    }
    await syncer.sync("wiki", source(confluence, spaces=["ENG", "OPS"]))
    assert len(await index.documents()) == 4
    confluence.throttle = 100  # the listing fails: nothing is pruned
    with pytest.raises(SourceUnavailable):
        await syncer.sync("wiki", source(confluence, spaces=["ENG"]))
    assert len(await index.documents()) == 4
    confluence.throttle = 0
    report = await syncer.sync("wiki", source(confluence, spaces=["ENG"]))
    assert report.counts[Outcome.DELETED] == 2
    assert all("/ENG/" in doc_id for doc_id in await index.documents())


def attached_files(fake: FakeConfluence) -> tuple[str, str]:
    """A two-page PDF runbook, a Markdown note and a Word file on the first ENG page; the pages
    are cut to that space's first three. Returns the page's id and title."""
    fake.pages = {k: v for k, v in list(fake.pages.items())[:3]}
    page = next(iter(fake.pages.values()))
    runbook = make_pdf(
        [["Release runbook", "Freeze the branch first."], ["Rollback", "Run make rollback-42."]]
    )
    fake.attach(page.page_id, "Release runbook.pdf", "application/pdf", runbook)
    # Confluence often serves Markdown as a generic binary: its name says what it is.
    note = b"# On-call notes\n\n## Paging\n\nThe pager rotates every Tuesday at noon.\n"
    fake.attach(page.page_id, "oncall.md", "application/octet-stream", note)
    escalation = make_docx(
        [("Heading 1", "Escalation"), ("Normal", "Call the duty manager after 30 minutes.")]
    )
    word = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    fake.attach(page.page_id, "Escalation.docx", word, escalation)
    fake.attach(page.page_id, "Minutes.doc", "application/msword", b"\xd0\xcf\x11\xe0 Word 97")
    return page.page_id, page.title


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_attached_files_are_documents_downloaded_again_only_when_their_version_moves(
    confluence: FakeConfluence, syncer: SourceSyncer, index
) -> None:
    page_id, title = attached_files(confluence)
    first = await syncer.sync("wiki", source(confluence, spaces=["ENG"]))
    assert first.counts[Outcome.ADDED] == 3 + 3  # the pages and the three files
    assert confluence.requests["attachments"] == 1  # one listing for the space
    hit = (await index.search("make rollback-42", k=1))[0]
    assert "Run make rollback-42" in hit.chunk.text
    download = f"{confluence.base}{'/wiki' if confluence.flavour == 'cloud' else ''}"
    download += f"/download/attachments/{page_id}/Release%20runbook.pdf"
    assert hit.chunk.url == download + "#page=2"  # the passage's own page of the PDF
    note = (await index.search("pager rotates every Tuesday", k=1))[0]
    assert note.chunk.url.endswith(f"/{page_id}/oncall.md#paging")  # read as Markdown
    word = (await index.search("call the duty manager", k=1))[0]
    assert word.chunk.url.endswith(f"/{page_id}/Escalation.docx")  # no anchor opens a .docx
    skipped = {s.display: s.reason for s in first.skipped}
    assert skipped[f"ENG: {title} / diagram-0.png"] == "an attachment of a type not read (.png)"
    assert skipped[f"ENG: {title} / Minutes.doc"] == (
        "an attachment of a type not read (.doc; Word 97-2003: save it as .docx)"
    )
    if confluence.flavour == "cloud":  # the site redirected to its media host
        assert confluence.requests["media"] == 3
        assert confluence.media_authorizations == [None] * 3  # the token stayed on the site

    confluence.requests.clear()
    unchanged = await syncer.sync("wiki", source(confluence, spaces=["ENG"]))
    assert confluence.requests["download"] == 0
    assert unchanged.counts[Outcome.UNCHANGED] == 6
    assert not unchanged.skipped  # no page was read: their images are not reported again

    runbook = next(a for a in confluence.attachments.values() if a.filename.endswith(".pdf"))
    runbook.data = make_pdf([["Release runbook"], ["Rollback", "Run make rollback-43."]])
    runbook.version += 1
    oncall = next(a for a in confluence.attachments.values() if a.filename == "oncall.md")
    del confluence.attachments[oncall.attachment_id]
    third = await syncer.sync("wiki", source(confluence, spaces=["ENG"]))
    assert confluence.requests["download"] == 1  # the new version, nothing else
    assert third.counts[Outcome.UPDATED] == 1
    assert third.counts[Outcome.DELETED] == 1  # the file taken off the page
    assert "rollback-43" in (await index.search("make rollback-43", k=1))[0].chunk.text
    assert not any(d.endswith("/" + oncall.attachment_id) for d in await index.documents())

    confluence.search_status = 500  # the files can't be listed: the pages sync, the files stay
    edited = next(p for p in confluence.pages.values() if p.page_id != page_id)
    edited.body, edited.version = "<p>Edited while the search was down.</p>", edited.version + 1
    down = await syncer.sync("wiki", source(confluence, spaces=["ENG"]))
    assert down.counts[Outcome.UPDATED] == 1
    assert down.counts[Outcome.DELETED] == 0
    reason = {s.display: s.reason for s in down.skipped}["ENG: attachments"]
    assert reason.startswith("Confluence answered HTTP 500")
    assert reason.endswith("(the files indexed before are kept)")
    assert "rollback-43" in (await index.search("make rollback-43", k=1))[0].chunk.text
    confluence.search_status = None

    del confluence.pages[page_id]  # a page deleted with its files
    fourth = await syncer.sync("wiki", source(confluence, spaces=["ENG"]))
    assert fourth.counts[Outcome.DELETED] == 3
    assert len(await index.documents()) == 2


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_attached_decks_and_workbooks_are_read_by_slide_and_sheet(
    confluence: FakeConfluence, syncer: SourceSyncer, index
) -> None:
    """Confluence serves both as a generic binary as often as by their own type: the name
    says what each is."""
    confluence.pages = {k: v for k, v in list(confluence.pages.items())[:1]}
    page = next(iter(confluence.pages.values()))
    deck = make_pptx([SlideSpec(title="Launch"), SlideSpec(title="Dates", texts=["GA is May 4."])])
    confluence.attach(page.page_id, "Launch.pptx", "application/octet-stream", deck)
    sheet = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    book = make_xlsx({"Owners": [["Area", "Owner"], ["Billing", "Team Pay"]]})
    confluence.attach(page.page_id, "Owners.xlsx", sheet, book)
    confluence.attach(page.page_id, "Old.ppt", "application/vnd.ms-powerpoint", b"\xd0\xcf")
    report = await syncer.sync("wiki", source(confluence, spaces=["ENG"]))
    assert report.counts[Outcome.ADDED] == 1 + 2
    slide = (await index.search("GA is May 4", k=1))[0]
    assert (slide.chunk.heading, slide.chunk.title) == ("Slide 2: Dates", "Launch")
    assert slide.chunk.url.endswith(f"/download/attachments/{page.page_id}/Launch.pptx")
    row = (await index.search("who owns billing", k=1))[0]
    assert row.chunk.text == "Area: Billing | Owner: Team Pay"
    assert row.chunk.url.endswith(f"/download/attachments/{page.page_id}/Owners.xlsx")
    skipped = {s.display: s.reason for s in report.skipped}
    assert skipped[f"ENG: {page.title} / Old.ppt"] == (
        "an attachment of a type not read (.ppt; PowerPoint 97-2003: save it as .pptx)"
    )


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_an_attached_file_over_the_size_limit_is_skipped_without_downloading_it(
    confluence: FakeConfluence, syncer: SourceSyncer
) -> None:
    """Listed over the limit: not asked for. Listed small but sent large: cut off one byte past
    the limit, however much the server sends."""
    confluence.pages = {k: v for k, v in list(confluence.pages.items())[:1]}
    page = next(iter(confluence.pages.values()))
    big = confluence.attach(page.page_id, "big.txt", "text/plain", b"x" * 5_000)
    liar = confluence.attach(page.page_id, "liar.txt", "text/plain", b"y" * 500_000)
    liar.listed_size = 10
    small = syncer.settings.model_copy(update={"max_file_bytes": 1_000})
    report = await dataclasses.replace(syncer, settings=small).sync(
        "wiki", source(confluence, spaces=["ENG"])
    )
    skipped = {s.display: s.reason for s in report.skipped}
    limit = "over the limit of 1,000 bytes (ingest.max_file_bytes)"
    assert skipped[f"ENG: {page.title} / big.txt"] == limit
    assert skipped[f"ENG: {page.title} / liar.txt"] == limit
    assert confluence.requests["download"] == 1  # the liar's; the big one was never asked for
    assert big.filename not in "".join(confluence.downloaded)


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_a_file_that_fails_to_download_keeps_its_copy_and_is_read_again_next_time(
    confluence: FakeConfluence, syncer: SourceSyncer, index
) -> None:
    attached_files(confluence)
    await syncer.sync("wiki", source(confluence, spaces=["ENG"]))
    runbook = next(a for a in confluence.attachments.values() if a.filename.endswith(".pdf"))
    runbook.data = make_pdf([["Release runbook"], ["Rollback", "Run make rollback-44."]])
    runbook.version += 1
    confluence.broken = {runbook.attachment_id: 503}
    down = await syncer.sync("wiki", source(confluence, spaces=["ENG"]))
    assert down.counts[Outcome.DELETED] == 0
    reasons = [s.reason for s in down.skipped if s.display.endswith("/ Release runbook.pdf")]
    assert reasons == [f"HTTP 503 from {runbook_url(confluence, runbook)}"]
    assert "rollback-42" in (await index.search("make rollback-42", k=1))[0].chunk.text

    confluence.broken = {}
    confluence.requests.clear()
    back = await syncer.sync("wiki", source(confluence, spaces=["ENG"]))
    assert confluence.requests["download"] == 1
    assert back.counts[Outcome.UPDATED] == 1
    assert "rollback-44" in (await index.search("make rollback-44", k=1))[0].chunk.text


def runbook_url(fake: FakeConfluence, attachment: FakeAttachment) -> str:
    wiki = "/wiki" if fake.flavour == "cloud" else ""
    name = attachment.filename.replace(" ", "%20")
    return f"{fake.base}{wiki}/download/attachments/{attachment.page_id}/{name}"


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_hostile_attachment_listings_cannot_send_the_bot_or_its_readers_elsewhere(
    confluence: FakeConfluence, syncer: SourceSyncer, index, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file name with path and query characters is one path segment of the site's own
    download path; a file listed on something other than a synced page (a blog post) is left
    out; a listed download link is never followed; a file listed twice is reported once."""
    confluence.pages = {k: v for k, v in list(confluence.pages.items())[:1]}
    page = next(iter(confluence.pages.values()))
    confluence.attach(page.page_id, "../../x?y=1#z.md", "text/markdown", b"# Odd\n\nodd words\n")
    stray = confluence.attach(page.page_id, "stray.md", "text/markdown", b"# Stray\n\nstray\n")
    original = confluence._attachment_result

    def hostile(attachment: FakeAttachment) -> dict[str, Any]:
        result: dict[str, Any] = original(attachment)
        result["_links"]["download"] = "https://evil.example/steal"
        if attachment is stray:
            result["container"] = {"id": "77777", "type": "blogpost", "title": "News"}
        return result

    monkeypatch.setattr(confluence, "_attachment_result", hostile)
    image = next(a for a in confluence.attachments.values() if a.filename.endswith(".png"))
    confluence.attachments["again"] = image  # listed twice, as a listing that moved can
    report = await syncer.sync("wiki", source(confluence, spaces=["ENG"]))
    assert report.counts[Outcome.ADDED] == 2  # the page and the odd file
    assert [s.display for s in report.skipped] == [f"ENG: {page.title} / {image.filename}"]
    assert confluence.downloaded == [
        f"{'/wiki' if confluence.flavour == 'cloud' else ''}/download/attachments/"
        f"{page.page_id}/..%2F..%2Fx%3Fy%3D1%23z.md"
    ]
    hit = (await index.search("odd words", k=1))[0]
    assert hit.chunk.url.startswith(confluence.base + "/")
    assert not any(d.endswith("/" + stray.attachment_id) for d in await index.documents())


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_a_download_redirected_to_a_metadata_address_is_refused(
    confluence: FakeConfluence, syncer: SourceSyncer, index
) -> None:
    """Cloud's downloads redirect to its media host: a site that sends one to the cloud
    metadata address has that file skipped, with why, and nothing asked of that address."""
    if confluence.flavour != "cloud":
        pytest.skip("Data Center serves its files itself: no redirect to judge")
    attached_files(confluence)
    confluence.media_host = "http://169.254.169.254"
    report = await syncer.sync("wiki", source(confluence, spaces=["ENG"]))
    reasons = {s.reason for s in report.skipped if "attachment of a type" not in s.reason}
    assert reasons == {"redirect to a link-local address (169.254.169.254) refused"}
    assert report.counts[Outcome.ADDED] == 3  # the pages; none of the three files
    assert confluence.requests["media"] == 0


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_attachments_turned_off_are_neither_listed_nor_indexed(
    confluence: FakeConfluence, syncer: SourceSyncer
) -> None:
    attached_files(confluence)
    report = await tuned(syncer, attachments=False).sync("wiki", source(confluence, spaces=["ENG"]))
    assert report.counts[Outcome.ADDED] == 3
    assert confluence.requests["attachments"] == 0
    assert confluence.requests["download"] == 0
    assert not report.skipped


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_blog_posts_are_read_when_asked_for_with_their_files(
    confluence: FakeConfluence, syncer: SourceSyncer, index
) -> None:
    """Off by default: not even listed. On: listed, read, edited and deleted as pages are,
    linked at their own page, their attached files with them."""
    confluence.pages = {k: v for k, v in list(confluence.pages.items())[:2]}
    body = "<h2>What changed</h2><p>The build cache now lives in the ops bucket.</p>"
    post = FakePage("7001", "ENG", "November release notes", body, kind="blogpost")
    confluence.pages[post.page_id] = post
    confluence.attach(
        post.page_id, "changelog.md", "text/markdown", b"# Changelog\n\nv2.4 ships.\n"
    )
    first = await syncer.sync("wiki", source(confluence, spaces=["ENG"]))
    assert first.counts[Outcome.ADDED] == 2  # the pages alone
    assert confluence.requests["listing"] == 1  # no blog listing was asked for
    on = tuned(syncer, blogposts=True)
    second = await on.sync("wiki", source(confluence, spaces=["ENG"]))
    assert second.counts[Outcome.ADDED] == 2  # the post and its file
    hit = (await index.search("build cache ops bucket", k=1))[0]
    assert hit.chunk.title == "November release notes"
    cloud = confluence.flavour == "cloud"
    assert ("/spaces/ENG/blog/2026/11/01/7001/" if cloud else "/display/ENG/2026/11/01/") in (
        hit.chunk.url
    )
    assert "v2.4 ships" in (await index.search("changelog v2.4 ships", k=1))[0].chunk.text

    post.body, post.version = body.replace("ops bucket", "shared bucket"), 2
    edited = await on.sync("wiki", source(confluence, spaces=["ENG"]))
    assert edited.counts[Outcome.UPDATED] == 1
    assert "shared bucket" in (await index.search("build cache bucket", k=1))[0].chunk.text
    del confluence.pages[post.page_id]
    gone = await on.sync("wiki", source(confluence, spaces=["ENG"]))
    assert gone.counts[Outcome.DELETED] == 2  # the post and its file
