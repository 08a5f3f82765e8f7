"""Named sources (`sources:` in config.yaml): `bot sync` ingests each through its connector,
labelled with its name and pruned of what went; `bot sources list` shows how the last sync of
each went; `bot clock` runs each on its schedule."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import structlog
from typer.testing import CliRunner

from bot.cli import app
from bot.cli.sources import NONE
from bot.clock import SyncJob
from core.errors import RunLockHeld, SourceUnavailable
from tests.fakes.docs_site import DocsSite
from tests.integration.test_site_crawl import site_in_a_thread  # noqa: F401 (a fixture)

runner = CliRunner()


@pytest.fixture
def configured(
    site_in_a_thread: DocsSite,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    folder = tmp_path / "runbooks"
    folder.mkdir()
    (folder / "restart.md").write_text("# Restart\n\nRestart the worker with `make restart`.")
    (folder / "rollback.md").write_text("# Rollback\n\nRoll back with `make rollback`.")
    sources = {
        "handbook": {"type": "site", "location": [site_in_a_thread.base + "/docs/"]},
        "runbooks": {"type": "files", "location": [str(folder)], "schedule": "0 4 * * *"},
    }
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("BOT_SOURCES", json.dumps(sources))
    monkeypatch.setenv("BOT_INGEST__CRAWL__DELAY_S", "0")
    return folder


def test_sync_ingests_every_source_and_the_list_says_how_it_went(configured: Path) -> None:
    first = runner.invoke(app, ["sync"])
    assert first.exit_code == 0, first.output
    assert "handbook: 5 added" in first.output
    assert "runbooks: 2 added" in first.output
    listed = " ".join(runner.invoke(app, ["sources", "list"]).output.replace("│", " ").split())
    assert "handbook site" in listed
    assert "0 4 * * *" in listed
    assert "never" not in listed

    (configured / "rollback.md").unlink()
    again = runner.invoke(app, ["sync", "runbooks"])
    assert again.exit_code == 0, again.output
    assert "runbooks: 1 unchanged, 1 deleted" in again.output
    assert "handbook" not in again.output  # only the one named


def test_unknown_or_missing_sources_are_one_clear_line(
    configured: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unknown = runner.invoke(app, ["sync", "wiki"])
    assert unknown.exit_code == 1
    assert "unknown source wiki; configured: handbook, runbooks" in unknown.output
    monkeypatch.setenv("BOT_SOURCES", "{}")
    none = runner.invoke(app, ["sync"])
    assert none.exit_code == 1
    assert "no sources in config.yaml" in none.output
    other = configured.parent / "s3.yaml"
    other.write_text("search:\n  top_k: 8\n")
    named = runner.invoke(app, ["-c", str(other), "sync"])  # the file read is the one named
    assert named.exit_code == 1
    assert f"no sources in {other} (" in " ".join(named.output.split())
    listed = runner.invoke(app, ["sources", "list"], env={"COLUMNS": "300"})
    assert listed.exit_code == 0  # nothing to list is no failure, but it says where to look
    assert listed.output.strip() == NONE


def test_a_password_in_a_sources_url_is_sent_and_never_stored_or_shown(
    site_in_a_thread: DocsSite,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A site behind basic auth, crawled with the password in its URL: it was in every page's
    id and citation link. A Git remote's token in its URL was shown by `bot sources list`."""
    site_in_a_thread.authorization = "Basic " + base64.b64encode(b"alice:s3cr3t").decode()
    behind_auth = site_in_a_thread.base.replace("://", "://alice:s3cr3t@") + "/docs/"
    sources = {
        "handbook": {"type": "site", "location": [behind_auth]},
        "guides": {"type": "git", "location": ["https://x:s3cr3t@git.example.com/guides.git"]},
    }
    data = tmp_path / "data"
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(data))
    monkeypatch.setenv("BOT_SOURCES", json.dumps(sources))
    monkeypatch.setenv("BOT_INGEST__CRAWL__DELAY_S", "0")
    synced = runner.invoke(app, ["sync", "handbook"])
    assert synced.exit_code == 0, synced.output
    assert "handbook: 5 added" in synced.output  # robots.txt and the sitemap read too
    listed = runner.invoke(app, ["sources", "list"], env={"COLUMNS": "300"})
    assert "git.example.com/guides.git" in listed.output
    shown = synced.output + listed.output
    stored = [path.read_bytes() for path in data.rglob("*") if path.is_file()]
    assert "s3cr3t" not in shown + " ".join(str(path) for path in data.rglob("*"))
    assert not [blob for blob in stored if b"s3cr3t" in blob]


async def test_a_scheduled_sync_leaves_a_running_one_alone() -> None:
    async def held() -> None:
        raise RunLockHeld("another sync-runbooks is running")

    job = SyncJob("runbooks", "0 4 * * *", held)
    with structlog.testing.capture_logs() as logs:
        await job.run()
    assert [e["event"] for e in logs] == ["sync_skipped"]
    assert job.job_id == "sync-runbooks"


async def test_a_scheduled_sync_that_fails_says_why_in_one_line() -> None:
    """A source's own failure (its folder gone, its server refusing) is one error line in the
    clock's log, not a traceback; a bug still gets its traceback."""

    async def gone() -> None:
        raise SourceUnavailable("runbooks: nothing to sync at /srv/runbooks")

    async def bug() -> None:
        raise KeyError("oops")

    with structlog.testing.capture_logs() as logs:
        await SyncJob("runbooks", "0 4 * * *", gone).run()
        await SyncJob("runbooks", "0 4 * * *", bug).run()
    known, unexpected = logs
    assert known["event"] == unexpected["event"] == "sync_failed"
    assert known["log_level"] == "error"
    assert known["reason"] == "runbooks: nothing to sync at /srv/runbooks"
    assert "exc_info" not in known
    assert unexpected["exc_info"] is True


def test_a_files_source_takes_only_what_its_patterns_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "wiki"
    (folder / "drafts").mkdir(parents=True)
    (folder / "ops").mkdir()
    (folder / "ops" / "deploy.md").write_text("# Deploy\n\nDeploy with `make deploy`.")
    (folder / "ops" / "notes.txt").write_text("Scratch notes.")
    (folder / "drafts" / "idea.md").write_text("# Idea\n\nNot ready.")
    sources = {
        "wiki": {
            "type": "files",
            "location": [str(folder)],
            "include": ["*.md"],
            "exclude": ["drafts/"],
        }
    }
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("BOT_SOURCES", json.dumps(sources))
    first = runner.invoke(app, ["sync"])
    assert first.exit_code == 0, first.output
    assert "wiki: 1 added" in first.output  # deploy.md; not notes.txt, not the draft

    (folder / "ops" / "deploy.md").rename(folder / "drafts" / "deploy.md")
    moved = runner.invoke(app, ["sync"])
    assert moved.exit_code == 0, moved.output
    assert "wiki: 1 deleted" in moved.output  # moved out of what the patterns take


def test_a_source_that_cannot_be_read_fails_with_why_and_the_others_sync(
    site_in_a_thread: DocsSite,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A files source whose folder is not there, a site whose start URL can't be read: each
    fails with one line (not "nothing found", exit 0), and the other sources still sync."""
    folder = tmp_path / "runbooks"
    folder.mkdir()
    (folder / "restart.md").write_text("# Restart\n\nRestart the worker with `make restart`.")
    site_in_a_thread.redirects["/docs/loop"] = "/docs/loop"
    start = site_in_a_thread.base + "/docs/loop"
    sources = {
        "gone": {"type": "files", "location": [str(tmp_path / "unmounted")]},
        "looping": {"type": "site", "location": [start]},
        "runbooks": {"type": "files", "location": [str(folder)]},
    }
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("BOT_SOURCES", json.dumps(sources))
    monkeypatch.setenv("BOT_INGEST__CRAWL__DELAY_S", "0")
    monkeypatch.setenv("BOT_INGEST__CRAWL__ROBOTS", "false")
    result = runner.invoke(app, ["sync"])
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        f"gone: nothing to sync at {tmp_path / 'unmounted'} (no such file, folder or URL)",
        f"looping: nothing to sync at {start} (more than 20 redirects)",
        "runbooks: 1 added",
        "error: sync failed for gone, looping (bot sources list shows why)",
    ]
    listed = " ".join(runner.invoke(app, ["sources", "list"]).output.replace("│", " ").split())
    assert listed.count("failed:") == 2  # the list says so too


def test_a_files_source_moved_elsewhere_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The source's folder moved: the old folder's documents go with the next sync, but not
    while a location can't be read (an unmounted share is not "every file deleted"), and a
    document another label holds is not the source's to prune."""
    old, new = tmp_path / "old", tmp_path / "new"
    for folder in (old, new):
        folder.mkdir()
        (folder / "restart.md").write_text(f"# Restart\n\nRestart from {folder.name}.")
    (old / "notes.md").write_text("# Notes\n\nIngested by hand.")
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path / "data"))

    def sync(*locations: Path) -> str:
        sources = {"runbooks": {"type": "files", "location": [str(p) for p in locations]}}
        monkeypatch.setenv("BOT_SOURCES", json.dumps(sources))
        return runner.invoke(app, ["sync"]).output

    assert "runbooks: 2 added" in sync(old)
    hand = runner.invoke(app, ["ingest", str(old / "notes.md"), "--source", "notes"])
    assert hand.exit_code == 0, hand.output
    assert "deleted" not in sync(new, tmp_path / "unmounted")
    assert "runbooks: 1 unchanged, 1 deleted" in sync(new)
    assert "runbooks: 1 unchanged" in sync(new)
    remaining = runner.invoke(app, ["remove", "notes"])
    assert "notes (source): 1 document(s)" in remaining.output


def test_a_long_sync_shows_its_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sync of many documents says how far it is, as `bot ingest` does (a line every tenth
    of the way when the output is not a terminal), then its one-line result."""
    folder = tmp_path / "runbooks"
    folder.mkdir()
    for n in range(20):
        (folder / f"step-{n:02}.md").write_text(f"# Step {n}\n\nDo step number {n}.")
    sources = {"runbooks": {"type": "files", "location": [str(folder)]}}
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("BOT_SOURCES", json.dumps(sources))
    monkeypatch.setenv("BOT_INGEST__PROGRESS_MIN_ITEMS", "10")
    result = runner.invoke(app, ["sync"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "Indexing: 2/20 documents"
    assert "Indexing: 20/20 documents" in lines
    assert lines[-1] == "runbooks: 20 added"


def test_a_source_taken_out_of_the_config_is_named_until_its_documents_are_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No sync prunes a source config.yaml no longer names, so its documents would be cited
    for good, unseen: the list, a sync and the doctor name it until `bot remove`."""
    folders = {}
    for name in ("runbooks", "wiki"):
        folders[name] = tmp_path / name
        folders[name].mkdir()
        (folders[name] / f"{name}.md").write_text(f"# {name.title()}\n\nAll about the {name}.")
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path / "data"))
    both = {n: {"type": "files", "location": [str(f)]} for n, f in folders.items()}
    monkeypatch.setenv("BOT_SOURCES", json.dumps(both))
    assert runner.invoke(app, ["sync"]).exit_code == 0

    monkeypatch.setenv("BOT_SOURCES", json.dumps({"runbooks": both["runbooks"]}))
    gone = "wiki: not in config.yaml any more; its documents stay indexed until `bot remove wiki`"
    synced = runner.invoke(app, ["sync"])
    assert synced.exit_code == 0, synced.output
    assert gone in " ".join(synced.output.split())
    listed = " ".join(runner.invoke(app, ["sources", "list"]).output.replace("│", " ").split())
    assert "wiki - - -" in listed
    monkeypatch.setenv("COLUMNS", "1000")
    doctor = runner.invoke(app, ["doctor"])
    assert doctor.exit_code == 1
    assert "wiki (1 chunks): not in config.yaml any more" in doctor.output

    assert runner.invoke(app, ["remove", "wiki"]).exit_code == 0
    listed = runner.invoke(app, ["sources", "list"]).output
    assert "wiki" not in listed
    assert runner.invoke(app, ["doctor"]).exit_code == 0
    assert "wiki" not in runner.invoke(app, ["sync"]).output


def test_a_source_whose_every_item_is_skipped_fails_as_ingest_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A source that gives the bot nothing (here: only unsupported files) is a mistake in
    its settings: the sync fails with the first reason, not "2 skipped" and exit 0."""
    folder = tmp_path / "exports"
    folder.mkdir()
    (folder / "dump.bin").write_bytes(b"\x00\x01")
    (folder / "tool.exe").write_bytes(b"MZ")
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv(
        "BOT_SOURCES", json.dumps({"exports": {"type": "files", "location": [str(folder)]}})
    )
    synced = runner.invoke(app, ["sync"])
    assert synced.exit_code == 1
    said = " ".join(synced.output.split())
    assert "exports: nothing was indexed: all 2 item(s) were skipped (the first:" in said
    assert "unsupported file type" in said


def test_removing_a_gone_source_that_never_indexed_anything_succeeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`bot sync` named it ("its documents stay indexed until `bot remove empty`"), and that
    command then failed: "nothing in the index matched empty"."""
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path / "data"))
    missing = {"empty": {"type": "files", "location": [str(tmp_path / "nowhere")]}}
    monkeypatch.setenv("BOT_SOURCES", json.dumps(missing))
    assert runner.invoke(app, ["sync"]).exit_code == 1  # the folder is not there
    monkeypatch.setenv("BOT_SOURCES", "{}")
    removed = runner.invoke(app, ["remove", "empty"])
    assert removed.exit_code == 0, removed.output
    assert "empty: no documents indexed; its sync record removed" in removed.output
    listed = runner.invoke(app, ["sources", "list"])
    assert "empty" not in listed.output


def test_a_sources_fingerprint_holds_no_password_of_its_location() -> None:
    """The status file keeps each source's settings fingerprint: an unsalted hash of the
    settings with the password in them, which anyone reading the file could test guesses
    against offline; and a rotated password re-read every page, as a change of settings."""
    from core.config import IngestSettings, SourceSettings
    from core.ingest.sync import fingerprint

    def of(password: str) -> str:
        url = f"https://alice:{password}@docs.example.com/handbook/"
        return fingerprint(SourceSettings(type="site", location=[url]), IngestSettings())

    assert of("Hunter2pw") == of("wrongpw")
    plain = SourceSettings(type="site", location=["https://docs.example.com/handbook/"])
    assert of("Hunter2pw") == fingerprint(plain, IngestSettings())


def test_a_site_that_shuts_the_bot_out_keeps_what_it_had_indexed(
    site_in_a_thread: DocsSite,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Skipped is not gone: robots.txt turned to `Disallow: /docs/` (a site's deploy mistake)
    made the sync prune every page the source held, then fail."""
    sources = {"handbook": {"type": "site", "location": [site_in_a_thread.base + "/docs/"]}}
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("BOT_SOURCES", json.dumps(sources))
    monkeypatch.setenv("BOT_INGEST__CRAWL__DELAY_S", "0")
    first = runner.invoke(app, ["sync"])
    assert first.exit_code == 0, first.output
    site_in_a_thread.robots_tail = "Disallow: /docs/\n"
    synced = runner.invoke(app, ["sync"], env={"COLUMNS": "400"})
    assert synced.exit_code == 1
    said = " ".join(synced.output.split())
    assert "handbook: nothing was indexed: all" in said
    assert "disallowed by robots.txt" in said
    assert "document(s) indexed from it before are kept" in said
    assert "`bot remove handbook`" in said
    listed = runner.invoke(app, ["search", "install", "--source", "handbook"])
    assert listed.exit_code == 0
    assert "No document has the source" not in listed.output


def test_a_first_sync_that_finds_nothing_is_a_failure_naming_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An include pattern matching nothing (`doc/**` for `docs/**`) said "nothing found" and
    exited 0. A source emptied since its last sync is still pruned, and that is no failure."""
    folder = tmp_path / "guides"
    (folder / "docs").mkdir(parents=True)
    (folder / "docs" / "setup.md").write_text("# Setup\n\nRun the installer.\n")
    sources = {"guides": {"type": "files", "location": [str(folder)], "include": ["doc/**"]}}
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("BOT_SOURCES", json.dumps(sources))
    synced = runner.invoke(app, ["sync"])
    assert synced.exit_code == 1
    said = " ".join(synced.output.split())
    assert f"guides: nothing found at {folder}: check the source's include and exclude" in said


@pytest.mark.parametrize(
    ("label", "said"),
    [
        ("runbooks", "runbooks is a source in config.yaml: its sync owns that label"),
        ("learned", "--source learned is the label of what the bot learns from the web"),
    ],
)
def test_ingest_refuses_a_label_a_sync_or_the_learning_owns(
    configured: Path, tmp_path: Path, label: str, said: str
) -> None:
    """What `bot ingest` wrote under a source's label would be deleted by that source's next
    sync (and the reverse for `learned`): refused before anything is written."""
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "notes.md").write_text("# Notes\n\nLoose notes about the deploy.")
    refused = runner.invoke(app, ["ingest", str(extra), "--source", label])
    assert refused.exit_code == 1
    assert said in " ".join(refused.output.split())
    assert "Ingested" not in refused.output


def test_a_removed_source_named_like_a_folder_here_is_refused_and_still_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`bot remove wiki` beside a `wiki` checkout was refused (the folder had nothing
    ingested), yet its sync record was forgotten and the command said "no documents indexed",
    exit 0: the documents stayed, and nothing named them any more."""
    source = tmp_path / "exported"
    source.mkdir()
    (source / "wiki.md").write_text("# Wiki\n\nAll about the wiki.")
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv(
        "BOT_SOURCES", json.dumps({"wiki": {"type": "files", "location": [str(source)]}})
    )
    assert runner.invoke(app, ["sync"]).exit_code == 0
    monkeypatch.setenv("BOT_SOURCES", "{}")
    (tmp_path / "wiki").mkdir()  # a checkout of the same name, here
    monkeypatch.chdir(tmp_path)
    refused = runner.invoke(app, ["remove", "wiki"])
    assert refused.exit_code == 1
    assert refused.output.startswith("error: wiki exists here, and it is also a source label")
    assert "wiki" in runner.invoke(app, ["sources", "list"]).output  # still named
    removed = runner.invoke(app, ["remove", "--source", "wiki"])
    assert removed.exit_code == 0, removed.output
    assert "wiki" not in runner.invoke(app, ["sources", "list"]).output
