"""Typed settings: `config.yaml` for everything, the environment for secrets and overrides.

Every setting has a default here and a one-line comment in `config.yaml`. Environment variables
override any key (`BOT_SEARCH__RRF_K=40` sets `search.rrf_k`), so a deployment can change a value
without editing the file. Secrets are never read from the file: a secret-looking key there is an
error, so a token can't end up committed next to the settings.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import UnionType
from typing import Annotated, Literal, TypeVar, Union, get_args, get_origin
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    HttpUrl,
    SecretStr,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from core.cron import cron_trigger
from core.domain.documents import LEARNED_SOURCE
from core.domain.secrets import is_issued_key, looks_like_key
from core.domain.urls import is_local_url

_DAY_S = 86_400
_V = TypeVar("_V")
_HTTP_URL = TypeAdapter(HttpUrl)
HTTP_URL_ERROR = "http_url"  # the error type of a refused URL: its value is shown redacted
UNSHOWN_ERROR = "unshown_value"  # the error type of a value that may be a secret: never shown


def is_http_url(text: str) -> bool:
    """An http(s) URL with a host, written out whole: `https:/host` and `http:host` parse
    (browsers guess), but a link built from them as written is broken."""
    try:
        _HTTP_URL.validate_python(text)
        return bool(urlsplit(text).netloc)
    except (ValidationError, ValueError):
        return False


def http_url(value: str) -> str:
    """A link or API root the bot builds on, checked when the settings load (and by `bot
    ingest --base-url`): without it, `handbook.example.com` goes into every citation link and
    `localhost:11434/v1` fails only at the first question. The text is kept as written
    (pydantic's URL type would add a `/` after a bare host, and base URLs get paths joined)."""
    text = value.strip()
    if not is_http_url(text):
        raise PydanticCustomError(
            HTTP_URL_ERROR,
            "not an http(s) URL: write it whole, scheme and host, such as "
            "https://docs.example.com/ or http://localhost:11434/v1",
        )
    return text


# Every URL setting the bot builds links or requests on.
HttpUrlText = Annotated[str, AfterValidator(http_url)]


def link_pattern(value: str) -> str:
    """A URL that citation links are made from (a Git source's `web_url`, whose `{path}` may
    sit in its query, as Azure DevOps' and Bitbucket Server's file views have it): checked as
    `http_url`, and without a user or password, which every link posted in a chat would show."""
    text = http_url(value)
    if urlsplit(text).username is not None:
        raise PydanticCustomError(
            HTTP_URL_ERROR,
            "a base for citation links can't hold a user or password: every link posted "
            "would show it",
        )
    return text


def link_base(value: str) -> str:
    """A URL each file's path is added to for its citation link (`ingest.base_url`, a source's
    `base_url`, `bot ingest --base-url`): a link pattern, with no query or fragment, which the
    path would land in (`…/docs?x=1/setup.md`)."""
    text = link_pattern(value)
    parts = urlsplit(text)
    if parts.query or parts.fragment:
        raise PydanticCustomError(
            HTTP_URL_ERROR,
            "a base for citation links can't hold a query (?) or fragment (#): each file's "
            "path is added after it",
        )
    return text


LinkBaseText = Annotated[str, AfterValidator(link_base)]
LinkPatternText = Annotated[str, AfterValidator(link_pattern)]


def home_expanded(path: Path) -> Path:
    """`~/docbot-data` means the home directory, as in a shell, never a folder named `~` here.
    An unknown `~user` (or no home at all) is the setting's error, not a crash at load."""
    try:
        return path.expanduser()
    except RuntimeError as exc:
        raise ValueError(f"{path}: {exc}") from None


def named_path(value: object) -> object:
    """An empty path is a mistake, not the current folder (which `Path("")` would be)."""
    if isinstance(value, str) and not value.strip():
        raise ValueError('an empty path: write the folder ("." for the current one)')
    return value


UserPath = Annotated[Path, BeforeValidator(named_path), AfterValidator(home_expanded)]


def file_named(path: Path) -> Path:
    """A path that must name a file (`search.sqlite_path: .` names a folder)."""
    if path.name in ("", ".", ".."):
        raise ValueError(
            f"{path} names a folder: write the file's path (such as .bot/index.sqlite)"
        )
    return path


FilePath = Annotated[UserPath, AfterValidator(file_named)]
_HEADER_VALUE = re.compile(r"[\x20-\x7e]+")


def header_value(value: str) -> str:
    """Text sent as an HTTP header (`ingest.user_agent`): one line of printable ASCII. A line
    break or a non-ASCII letter was accepted here and then failed every fetch of every URL."""
    if not _HEADER_VALUE.fullmatch(value):
        raise ValueError("must be one line of printable ASCII: it is sent as an HTTP header")
    return value


HeaderText = Annotated[str, AfterValidator(header_value)]


def a_name(value: str) -> str:
    """A model's or an account's name, never a key pasted in its place (the key's variable is
    named in the comment beside `model:`): every `bot doctor` and answer trace shows the name."""
    if is_issued_key(value):
        raise PydanticCustomError(
            UNSHOWN_ERROR,
            "a name, not a key: keys and tokens go in environment variables (.env.example "
            "names them), never in config.yaml",
        )
    return value


NameText = Annotated[str, AfterValidator(a_name)]


def _scalar_types(annotation: object) -> set[object]:
    """The plain types a field's annotation admits (`int | None` -> {int, NoneType})."""
    if get_origin(annotation) in (Union, UnionType):
        return set().union(*(_scalar_types(a) for a in get_args(annotation)))
    return {annotation}


class _Section(BaseModel):
    # Unknown keys are errors: a typo must not silently fall back to a default.
    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _a_switch_is_not_a_number(cls, value: object, info: ValidationInfo) -> object:
        """YAML reads `true`, `yes` and `on` as a switch, which pydantic would take as 1 for a
        number: `top_k: true` must be an error, not one passage."""
        if isinstance(value, bool) and info.field_name is not None:
            kinds = _scalar_types(cls.model_fields[info.field_name].annotation)
            if bool not in kinds and kinds & {int, float}:
                raise ValueError("a number, not a switch (true, false, yes, no, on, off)")
        return value


class StorageSettings(_Section):
    data_dir: UserPath = Path(".bot")


class Bm25Weights(_Section):
    title: float = Field(2.0, ge=0)
    heading: float = Field(1.5, ge=0)
    text: float = Field(1.0, ge=0)
    keywords: float = Field(2.0, ge=0)


class ApproximateVectorSettings(_Section):
    """The SQLite index's vector side above `min_chunks`: an HNSW graph (usearch) whose
    candidates are re-scored exactly. Below it, an exact scan (milliseconds, never a miss)."""

    enabled: bool = True
    min_chunks: int = Field(20_000, ge=1)
    quantization: Literal["i8", "f16", "f32"] = "i8"
    connectivity: int = Field(32, ge=4, le=128)
    expansion_add: int = Field(128, ge=8, le=4_096)
    expansion_search: int = Field(400, ge=8, le=4_096)
    rescore: int = Field(400, ge=1, le=10_000)
    filtered_rescore_factor: int = Field(4, ge=1, le=100)
    save_after_changes: int = Field(10_000, ge=1)
    build_threads: int = Field(1, ge=0, le=256)
    build_batch: int = Field(10_000, ge=100, le=1_000_000)


class SearchSettings(_Section):
    backend: Literal["sqlite", "elasticsearch"] = "sqlite"
    sqlite_path: FilePath | None = None
    fusion: Literal["rrf", "zscore", "minmax"] = "minmax"
    vector_share: float = Field(0.5, ge=0, le=1)  # score fusion's weight of the vector side
    rrf_k: int = Field(60, ge=1, le=10_000)
    candidates: int = Field(100, ge=1, le=10_000)
    top_k: int = Field(8, ge=1, le=1_000)
    # Of the top_k passages a search returns, at most this many from one document while other
    # documents' candidates remain (0: no limit); BENCHMARKS.md, "What the model is shown".
    max_passages_per_document: int = Field(2, ge=0, le=1_000)
    bm25_weight: float = Field(1.0, ge=0)
    vector_weight: float = Field(1.0, ge=0)
    bm25_columns: Bm25Weights = Bm25Weights()
    bm25_max_postings: int = Field(7_500, ge=0)
    # The terms the budget left out, scored back on BM25's first `proximity_candidates`
    # (core/backends/sqlite/left_out.py; BENCHMARKS.md, "The postings budget at 50,000 passages").
    rescore_left_out_terms: bool = True
    # BM25's candidates re-scored by how closely the query's neighbouring words stand in them
    # (BENCHMARKS.md, "Term proximity, shipped"); 0: not at all.
    proximity_weight: float = Field(0.08, ge=0, le=10)
    proximity_window: int = Field(3, ge=1, le=50)
    # Only BM25's first this many candidates are re-scored: ranks the three benchmark sets as
    # all 100 do, at under a third of the cost.
    proximity_candidates: int = Field(30, ge=1, le=10_000)
    snippet_chars: int = Field(240, ge=20, le=5_000)
    busy_timeout_ms: int = Field(10_000, ge=0)
    integrity_check_s: float = Field(3.0, gt=0, le=3_600)
    max_query_chars: int = Field(2_000, ge=10, le=100_000)
    blas_threads: int = Field(1, ge=0, le=256)  # the vector scan's BLAS threads; 0: its default
    approximate: ApproximateVectorSettings = ApproximateVectorSettings()


class ElasticsearchSettings(_Section):
    url: str | None = None
    cloud_id: str | None = None
    username: NameText | None = None
    ca_certs: UserPath | None = None
    verify_certs: bool = True
    ssl_assert_fingerprint: str | None = None
    request_timeout_s: float = Field(10.0, gt=0)
    bulk_timeout_s: float = Field(120.0, gt=0)
    max_retries: int = Field(3, ge=0, le=20)
    retry_on_timeout: bool = True
    index_prefix: str = Field("docbot", pattern=r"^[a-z0-9][a-z0-9_-]{0,40}$")
    number_of_shards: int = Field(1, ge=1, le=1_024)
    number_of_replicas: int = Field(1, ge=0, le=16)
    fusion: Literal["client", "server"] = "client"
    num_candidates: int = Field(200, ge=1, le=10_000)
    bulk_chunk_size: int = Field(500, ge=1, le=10_000)
    bulk_max_retries: int = Field(5, ge=0, le=20)
    bulk_initial_backoff_s: float = Field(1.0, ge=0)
    write_refresh: bool = True
    conversation_max_turns: int = Field(100, ge=1, le=10_000)
    state_purge_interval_s: float = Field(3_600, gt=0)
    scan_page_size: int = Field(1_000, ge=10, le=10_000)
    reindex_lock_ttl_s: float = Field(6 * 3_600, gt=0)


class EmbeddingSettings(_Section):
    provider: Literal["local"] = "local"
    batch_size: int = Field(8, ge=1, le=1_024)  # bench.embed_memory: 32 took 1 GB more, no faster
    max_tokens: int = Field(256, ge=8, le=512)
    threads: int = Field(0, ge=0, le=256)
    query_threads: int = Field(1, ge=0, le=256)  # ONNX threads for a query's embedding
    cache_path: FilePath | None = None
    query_cache_size: int = Field(1_024, ge=0)


class CrawlSettings(_Section):
    """`bot ingest URL --crawl`: following a docs site's links and sitemaps."""

    max_pages: int = Field(500, ge=1, le=1_000_000)  # pages kept per crawl
    max_depth: int = Field(5, ge=0, le=100)  # links followed from a start URL
    delay_s: float = Field(0.2, ge=0, le=60)  # politeness: between two requests to one host
    concurrency: int = Field(4, ge=1, le=64)  # requests in flight at once
    max_links_per_page: int = Field(2_000, ge=1, le=100_000)
    max_sitemap_urls: int = Field(
        50_000, ge=1, le=1_000_000
    )  # per sitemap file (the protocol's limit)
    max_sitemaps: int = Field(100, ge=1, le=10_000)  # sitemap files read, index files included
    robots: bool = True  # honour robots.txt
    # robots.txt is read up to this many bytes and the rest ignored (Google's limit, 500 KiB):
    # parsed and matched against every URL on the event loop, it must stay small.
    max_robots_bytes: int = Field(512_000, ge=1_000, le=100_000_000)
    # Page bodies held in memory between download and indexing; the rest wait in a temporary
    # folder (the crawl must finish before its pages are indexed).
    max_held_bytes: int = Field(268_435_456, ge=0)


class GitSettings(_Section):
    """Git sources: how long one git command may take, how deep a clone goes, and whether
    it downloads only the files a document can come from."""

    timeout_s: float = Field(600.0, gt=0)  # one clone or fetch; a slower one fails the sync
    depth: int = Field(1, ge=1, le=1_000_000)  # commits fetched (1: a shallow clone)
    # a partial clone with a sparse checkout of the supported file types; false: every file
    documents_only: bool = True
    # what one git command may print (a tree of about 2.5 million files); more fails the sync
    max_output_bytes: int = Field(256 * 1024 * 1024, ge=1024, le=4 * 1024**3)


class ConfluenceSettings(_Section):
    """Confluence sources: how pages are listed and how long a throttled sync waits."""

    page_size: int = Field(100, ge=1, le=250)  # results asked for per listing request
    retries: int = Field(5, ge=0, le=20)  # a 429 or 5xx is retried this many times
    max_wait_s: float = Field(60.0, gt=0)  # longest wait between two tries (Retry-After capped)
    # All the waits of one sync: past it, a throttled request fails at once (a page keeps its
    # indexed copy), so a sync throttled throughout still ends.
    max_total_wait_s: float = Field(900.0, ge=0)
    max_listing_pages: int = Field(10_000, ge=1)  # listing requests per space, a runaway's bound
    # The files attached to pages become documents (those a parser reads: PDF, Word, Markdown, ...),
    # at the cost of one more listing per space and sync.
    attachments: bool = True
    # The spaces' blog posts become documents too (announcements, release notes: they age, so
    # off unless asked for), at the cost of one more listing per space and sync.
    blogposts: bool = False


_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A branch as git names one: never read as an option (a leading '-'), nothing git refuses in a
# ref name (spaces, controls, ~^:?*[\), no '..'.
_BRANCH = re.compile(r"(?!-)(?!.*\.\.)[^\x00-\x20\x7f~^:?*\[\\]+")
# A GitHub or GitLab page of a repository's folder or file, pasted from the browser as a git
# location: the repository, the view (tree or blob), and the branch and path after it.
_WEB_VIEW_OF_REPOSITORY = re.compile(
    r"(?P<repo>https?://(?:www\.)?(?:github\.com|gitlab\.com)/[^/?#]+(?:/[^/?#]+)+?)"
    r"(?:/-)?/(?P<view>tree|blob)/(?P<branch>[^/?#]+)(?:/(?P<path>[^?#]*))?(?:[?#].*)?"
)
_COMMON_SOURCE_KEYS = frozenset({"type", "location", "schedule"})
# What each type of source reads besides those: a key of another type would be ignored.
_SOURCE_KEYS: dict[str, frozenset[str]] = {
    "site": frozenset({"sitemaps", "prefixes"}),
    "files": frozenset({"include", "exclude", "base_url"}),
    "git": frozenset({"include", "exclude", "branch", "web_url", "token_env"}),
    "confluence": frozenset({"spaces", "flavour", "username", "token_env"}),
}


def _repository_of(page: re.Match[str]) -> str:
    """What to write instead of a browser's page of a repository: the repository's clone URL,
    with the page's branch and folder as `branch` and `include`."""
    repo = page["repo"].removesuffix(".git") + ".git"
    path = (page["path"] or "").strip("/")
    pattern = f"{path}/**" if page["view"] == "tree" else path  # a folder's files, or a file
    include = f", include: [{pattern}]" if path else ""
    return (
        f"{page.group(0)} is a web page, not a repository: write location: [{repo}], "
        f"branch: {page['branch']}{include}"
    )


class SourceSettings(_Section):
    """One named source of `sources:`: what `bot sync NAME` ingests (its documents labelled
    NAME, pruned when gone), on `schedule` by `bot clock`."""

    type: Literal["site", "files", "git", "confluence"]
    # start URLs (site), files and folders (files), one repository URL or local path (git), or
    # the site's base URL (confluence: https://acme.atlassian.net/wiki, https://wiki.acme.com)
    location: list[str] = Field(min_length=1)
    sitemaps: list[str] = Field(default_factory=list)  # site: read these (default: robots.txt's)
    prefixes: list[str] = Field(default_factory=list)  # site: links followed under these
    # files, git: paths (relative to the folder or repository root) taken and left out, as
    # .gitignore patterns; no include: every file of a supported type
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    base_url: LinkBaseText | None = None  # files: where they are published, for citation links
    branch: str | None = None  # git: the branch synced (default: the remote's default branch)
    # git: a file's web view, with {branch}, {path} and {stem} (the path without its extension,
    # as wikis name pages); default: GitHub's or GitLab's pattern for their remotes
    web_url: LinkPatternText | None = None
    spaces: list[str] = Field(default_factory=list)  # confluence: the space keys synced
    flavour: Literal["cloud", "datacenter"] | None = None  # confluence; default: by the host
    username: NameText | None = None  # confluence cloud: the account's email, for its API token
    # git over HTTPS, confluence: the environment variable holding the token (Cloud API token,
    # Data Center personal access token)
    token_env: str | None = None
    schedule: str | None = None  # cron (UTC) for `bot clock`; none: only `bot sync`

    @field_validator("schedule")
    @classmethod
    def _valid_cron(cls, value: str | None) -> str | None:
        return None if value is None else checked_cron(value)

    @field_validator("location")
    @classmethod
    def _home_expanded(cls, value: list[str], info: ValidationInfo) -> list[str]:
        """A files source's `~/runbooks` is the home directory's, as in a shell (git expands
        its local paths itself)."""
        if info.data.get("type") == "files":
            return [os.path.expanduser(place) for place in value]
        return value

    @field_validator("token_env")
    @classmethod
    def _a_variable_name(cls, value: str | None) -> str | None:
        """The name of a variable, never the token: a pasted token would be shown by every
        message that names the variable, and saved in the sources' status file."""
        if value is not None and (not _VARIABLE_NAME.fullmatch(value) or looks_like_key(value)):
            raise PydanticCustomError(
                UNSHOWN_ERROR,
                "token_env is the name of the environment variable that holds the token "
                "(such as GITHUB_TOKEN), not the token itself",
            )
        return value

    @model_validator(mode="after")
    def _fits_its_type(self) -> SourceSettings:
        foreign = sorted(
            key
            for key in self.model_fields_set
            if key not in _COMMON_SOURCE_KEYS and key not in _SOURCE_KEYS[self.type]
        )
        if foreign:
            raise ValueError(
                f"{', '.join(foreign)}: not an option of a {self.type} source (its options: "
                f"{', '.join(sorted(_SOURCE_KEYS[self.type]))})"
            )
        if self.type == "site":
            for url in [*self.location, *self.sitemaps, *self.prefixes]:
                if not is_http_url(url):
                    raise ValueError(f"{url!r}: a site source's URLs are http(s) URLs")
        if self.type == "git" and len(self.location) != 1:
            raise ValueError("a git source has one location: a repository URL or local path")
        if self.type == "git" and (page := _WEB_VIEW_OF_REPOSITORY.fullmatch(self.location[0])):
            raise ValueError(_repository_of(page))
        if self.branch is not None and not _BRANCH.fullmatch(self.branch):
            raise ValueError(
                "branch: a branch name (no leading '-', no spaces or control characters)"
            )
        if self.type == "confluence":
            if len(self.location) != 1 or not is_http_url(self.location[0]):
                raise ValueError("a confluence source has one location: the site's base URL")
            if urlsplit(self.location[0]).username is not None:  # every page link has it
                raise ValueError(
                    "a confluence source's location can't hold a user or password (every "
                    "page's link would show it): set username and token_env"
                )
            if not self.spaces:
                raise ValueError("a confluence source names its spaces (spaces: [KEY, ...])")
        places = ("{path}", "{stem}", "{page}")
        if self.web_url is not None and not any(p in self.web_url for p in places):
            raise ValueError("web_url needs {path}, {stem} or {page}: where the file goes")
        return self


class IngestSettings(_Section):
    base_url: LinkBaseText | None = None
    chunk_chars: int = Field(1_000, ge=100, le=100_000)
    chunk_overlap_chars: int = Field(150, ge=0, le=10_000)
    embed_group_chunks: int = Field(256, ge=1, le=100_000)
    default_source: str = Field("docs", min_length=1, max_length=100)
    max_file_bytes: int = Field(20_000_000, ge=1)
    url_timeout_s: float = Field(20.0, gt=0)
    user_agent: HeaderText = "docbot-ingest/0.1"
    progress_min_items: int = Field(20, ge=0)
    url_deadline_s: float = Field(60.0, gt=0)
    parse_timeout_s: float = Field(30.0, gt=0)
    parse_threads: int = Field(2, ge=1, le=64)
    max_nesting_depth: int = Field(256, ge=8, le=10_000)
    max_html_attributes: int = Field(1_000, ge=10, le=1_000_000)
    max_unpacked_bytes: int = Field(50_000_000, ge=1)  # an Office file's zip unpacked, all members
    # How long a run lock outlives its holder's last renewal (a killed ingest's, on any host).
    lock_ttl_s: float = Field(600, ge=4)
    crawl: CrawlSettings = CrawlSettings()
    git: GitSettings = GitSettings()
    confluence: ConfluenceSettings = ConfluenceSettings()

    @model_validator(mode="after")
    def _overlap_below_size(self) -> IngestSettings:
        if self.chunk_overlap_chars >= self.chunk_chars:
            raise ValueError("chunk_overlap_chars must be smaller than chunk_chars")
        return self


class RepetitionSettings(_Section):
    """When a streamed reply has degenerated into repeating itself (a weak model's loop)."""

    max_line_repeats: int = Field(3, ge=2, le=1_000)
    min_line_chars: int = Field(16, ge=1, le=1_000)
    min_period_chars: int = Field(20, ge=2, le=10_000)
    max_period_chars: int = Field(400, ge=2, le=10_000)
    period_repeats: int = Field(3, ge=2, le=1_000)

    @model_validator(mode="after")
    def _periods_ordered(self) -> RepetitionSettings:
        if self.min_period_chars > self.max_period_chars:
            raise ValueError("min_period_chars must not exceed max_period_chars")
        return self


class LimitSettings(_Section):
    """How hard a burst may press on the chat adapters' answers (`core.answer.limits`)."""

    per_asker: int = Field(10, ge=0, le=10_000)  # 0: no cap
    window_s: float = Field(60.0, gt=0, le=86_400)
    model_concurrency: int = Field(8, ge=1, le=1_000)
    model_wait_s: float = Field(30.0, ge=0, le=3_600)


class GroundingSettings(_Section):
    """How a search-then-answer sentence is matched to the passage sentence that supports it."""

    min_overlap: float = Field(0.7, gt=0, le=1)
    min_terms: int = Field(1, ge=1, le=50)
    max_framing_terms: int = Field(3, ge=0, le=50)
    max_quote_chars: int = Field(300, ge=40, le=5_000)
    code_line_share: float = Field(1.0, gt=0, le=1)


class AnswerSettings(_Section):
    provider: Literal["auto", "anthropic", "openai", "extractive"] = "auto"
    max_rounds: int = Field(5, ge=2, le=20)
    max_tokens: int = Field(2_048, ge=256, le=64_000)
    history_turns: int = Field(6, ge=0, le=100)
    history_token_budget: int = Field(4_000, ge=0, le=200_000)
    max_question_chars: int = Field(4_000, ge=10, le=100_000)
    tool_timeout_s: float = Field(20.0, gt=0)
    # The model's whole answer, every turn and tool call of it: past this, the quoted passages
    # with the reason. Each turn has its own timeout too; a slow model searching round after
    # round would otherwise keep the asker waiting for max_rounds of them (half an hour on CPU).
    deadline_s: float = Field(600.0, gt=0, le=86_400)
    extractive_passages: int = Field(3, ge=1, le=10)
    quote_chars: int = Field(400, ge=50, le=5_000)
    repetition: RepetitionSettings = RepetitionSettings()
    grounding: GroundingSettings = GroundingSettings()
    limits: LimitSettings = LimitSettings()


class AnthropicSettings(_Section):
    model: NameText = Field("claude-sonnet-4-6", min_length=1)
    base_url: HttpUrlText | None = None
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(2, ge=0, le=10)
    # Claude's answers carry quotes the core verifies; holding each sentence to the passages
    # as well would drop the paraphrases a strong model writes (on: the strictest, for all).
    ground_answers: bool = False


class OpenAICompatibleSettings(_Section):
    base_url: HttpUrlText | None = None
    model: NameText | None = None
    timeout_s: float = Field(60.0, gt=0)
    local_timeout_s: float = Field(300.0, gt=0)
    max_tokens: int = Field(1_024, ge=64, le=64_000)
    probe_max_tokens: int = Field(256, ge=32, le=64_000)
    tool_support: Literal["auto", "named", "required", "none"] = "auto"
    tool_support_ttl_s: float = Field(7 * _DAY_S, gt=0)
    # A small local model's sentences without a marker are otherwise shown unchecked.
    ground_answers: bool = True

    @property
    def request_timeout_s(self) -> float:
        """A model on a server beside the bot usually runs on CPU: it gets `local_timeout_s`."""
        return self.local_timeout_s if is_local_url(self.base_url) else self.timeout_s

    max_retries: int = Field(2, ge=0, le=10)
    retry_initial_s: float = Field(0.5, ge=0)
    retry_max_s: float = Field(8.0, ge=0)


_SNOWFLAKE = r"\d{1,25}"  # a Discord id
# Who "Still need help?" may mention, by platform: a Slack user (U/W) or user group (S), a
# Discord user or role. A target of the other platform would be posted as text, pinging nobody.
_ESCALATION_TARGETS = {
    "slack": re.compile(r"[UWS][A-Z0-9]{2,30}"),
    "discord": re.compile(rf"(?:user|role):{_SNOWFLAKE}"),
}
_ESCALATION_FORMS = {
    "slack": "a Slack user (U0123ABC) or user group (S0123ABC) id",
    "discord": "a Discord user:ID or role:ID",
}
# The keys the adapters look a channel's policy up by: `slack/TEAM/CHANNEL` (a DM's channel is
# a D... id) and `discord/GUILD/CHANNEL` or `discord/dm/CHANNEL`; an entry is one of them or a
# whole-segment prefix of one. Ids as the platforms write them: a name (`slack/general`) or a
# misspelt platform would never match, and the policy would silently never apply.
_SLACK_TEAM = r"[TE][A-Z0-9]{1,30}"
_SLACK_CHANNEL = r"[CDG][A-Z0-9]{1,30}"
_SLACK_THREAD = r"\d+\.\d+"
_DISCORD_PREFIX = rf"discord(/({_SNOWFLAKE}|dm)(/{_SNOWFLAKE})?)?"
_CHANNEL_PREFIX = re.compile(rf"slack(/{_SLACK_TEAM}(/{_SLACK_CHANNEL})?)?|{_DISCORD_PREFIX}")
# Web search is also looked up by conversation, so a Slack thread (its ts) may have its own.
_CONVERSATION_PREFIX = re.compile(
    rf"slack(/{_SLACK_TEAM}(/{_SLACK_CHANNEL}(/{_SLACK_THREAD})?)?)?|{_DISCORD_PREFIX}"
)
CHANNEL_FORMS = (
    "slack, slack/TEAM_ID, slack/TEAM_ID/CHANNEL_ID, discord, discord/GUILD_ID, "
    "discord/GUILD_ID/CHANNEL_ID, discord/dm or discord/dm/CHANNEL_ID"
)


def is_channel_prefix(key: str) -> bool:
    """Whether `key` is a channel's key, or a prefix of one, as the adapters build them."""
    return _CHANNEL_PREFIX.fullmatch(key) is not None


def escalation_platform(target: str) -> str | None:
    """The platform that can mention `target` (`slack`, `discord`), or None for neither."""
    return next(
        (name for name, form in _ESCALATION_TARGETS.items() if form.fullmatch(target)), None
    )


def _platform_of(key: str) -> str:
    return key.split("/", 1)[0]


_SOURCE_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
_SHOWN_NAME_CHARS = 80  # of a refused name, in its error line


def source_name_problem(name: str) -> str | None:
    """Why `name` can't label a source (config.yaml's `sources`, `bot ingest --source`): the
    label is typed in commands (`bot sync`, `bot remove`, `bot search --source`), shown in
    tables and written in log lines, where a slash reads as a path and a control character
    or a page of text does harm."""
    if _SOURCE_NAME.fullmatch(name):
        return None
    return f"{name[:_SHOWN_NAME_CHARS]!r}: a source name is 1-64 letters, digits, '.', '_', '-'"


def most_specific(entries: Mapping[str, _V], key: str) -> list[_V]:
    """The entries whose conversation-key prefix contains `key` (matched on whole segments),
    least specific first: later ones override earlier ones."""
    matching = [
        (prefix.count("/"), value)
        for prefix, value in entries.items()
        if key == prefix or key.startswith(prefix + "/")
    ]
    return [value for _, value in sorted(matching, key=lambda m: m[0])]


def _check_prefixes(
    value: Mapping[str, _V], shape: re.Pattern[str] = _CHANNEL_PREFIX, forms: str = CHANNEL_FORMS
) -> Mapping[str, _V]:
    for prefix in value:
        if not shape.fullmatch(prefix):
            raise ValueError(
                f"{prefix!r} is not a conversation-key prefix: use {forms}, with the ids "
                "Slack and Discord show (not names), e.g. slack/T0123ABC/C0456DEF"
            )
    return value


class WebSearchSettings(_Section):
    enabled: bool = False
    channels: dict[str, bool] = Field(default_factory=dict)
    provider: Literal["perplexity"] = "perplexity"
    base_url: HttpUrlText = "https://api.perplexity.ai"
    model: NameText = Field("sonar", min_length=1)
    timeout_s: float = Field(10.0, gt=0)
    max_retries: int = Field(1, ge=0, le=10)
    retry_initial_s: float = Field(0.5, ge=0)
    retry_max_s: float = Field(4.0, ge=0)
    max_sources: int = Field(8, ge=1, le=50)
    max_source_chars: int = Field(2_000, ge=100, le=20_000)
    max_searches_per_answer: int = Field(2, ge=1, le=10)

    @field_validator("channels")
    @classmethod
    def _channel_prefixes(cls, value: dict[str, bool]) -> dict[str, bool]:
        forms = f"{CHANNEL_FORMS} (a Slack thread: slack/TEAM_ID/CHANNEL_ID/THREAD_TS)"
        return dict(_check_prefixes(value, _CONVERSATION_PREFIX, forms))


class ChannelPolicy(_Section):
    """How the bot behaves in a channel; a key left out is inherited from a less specific
    entry, then from `channels.default`."""

    trigger: Literal["mention", "auto", "off"] | None = None
    questions_only: bool | None = None
    answer_only_when_grounded: bool | None = None
    # An unasked question (an `auto` channel, a forum post) goes to the model only when some
    # passage is at least this close to it (cosine of the query and passage embeddings); 0: off.
    min_relevance: float | None = Field(None, ge=0, le=1)
    sources: list[str] | None = None
    web_search: bool | None = None
    private: bool | None = None
    reactions: bool | None = None
    escalate_to: list[str] | None = None
    # In a thread the bot answers in: `questions` answers only messages that read as one more
    # question for it (not "thanks", 👍 or words to a colleague); `all` answers every message.
    followups: Literal["questions", "all"] | None = None

    @field_validator("trigger", mode="before")
    @classmethod
    def _off_as_yaml_reads_it(cls, value: object) -> object:
        """`trigger: off`, as config.yaml's own comment writes it, is YAML 1.1's false."""
        return "off" if value is False else value

    @field_validator("min_relevance", mode="before")
    @classmethod
    def _a_cosine_not_a_switch(cls, value: object) -> object:
        """`true` would read as 1.0 and silently hold back every unasked question."""
        if isinstance(value, bool):
            raise ValueError("a cosine from 0 to 1 (0 turns the floor off), not true/false")
        return value

    @field_validator("escalate_to")
    @classmethod
    def _escalation_ids(cls, value: list[str] | None) -> list[str] | None:
        """Only ids, each of a kind the platforms can mention: the one place a mention may
        come from, so nothing else can be smuggled in."""
        for target in value or []:
            if escalation_platform(target) is None:
                raise ValueError(
                    f"{target!r} is not an escalation target: "
                    + " or ".join(_ESCALATION_FORMS.values())
                )
        return value


@dataclass(frozen=True, slots=True)
class WebSearchReach:
    everywhere: bool  # in a conversation no entry names
    on: tuple[str, ...]  # the prefixes entries name where it is on
    off: tuple[str, ...]  # and where it is off

    @property
    def anywhere(self) -> bool:
        return self.everywhere or bool(self.on)


# A conversation key no policy or web_search entry can name (they all start slack or discord).
_NAMED_BY_NO_ENTRY = "console"


@dataclass(frozen=True, slots=True)
class ResolvedPolicy:
    trigger: Literal["mention", "auto", "off"]
    questions_only: bool
    answer_only_when_grounded: bool
    sources: tuple[str, ...]  # empty: every source
    web_search: bool
    matched: tuple[str, ...]  # the prefixes that applied, least specific first
    escalate_to: tuple[str, ...] = ()  # who "Still need help?" mentions
    private: bool = False  # answers only the asker sees, with a button to share them
    reactions: bool = True  # the platform's reaction trigger asks about a message
    min_relevance: float = 0.0  # unasked questions: the closest passage's cosine at least this
    followups: Literal["questions", "all"] = "questions"  # which thread messages are answered
    # What the bot learned from the web is searched here: not where `web_search: false` is said
    # for the channel (its policy, or `web_search.channels`), only inherited from the default.
    learned: bool = True


BUILT_IN_CHANNEL_POLICY = ChannelPolicy(
    trigger="mention",
    questions_only=True,
    answer_only_when_grounded=True,
    min_relevance=0.3,
    sources=[],
    private=False,
    reactions=True,
    escalate_to=[],
    followups="questions",
)


class ChannelSettings(_Section):
    default: ChannelPolicy = BUILT_IN_CHANNEL_POLICY
    policies: dict[str, ChannelPolicy] = Field(default_factory=dict)
    # questions_only: after the rules, the packaged classifier over the message's embedding
    # tells docs questions from status checks and favours; false leaves the rules alone.
    question_classifier: bool = True

    @field_validator("policies")
    @classmethod
    def _policy_prefixes(cls, value: dict[str, ChannelPolicy]) -> dict[str, ChannelPolicy]:
        _check_prefixes(value)
        for prefix, policy in value.items():
            platform = _platform_of(prefix)
            for target in policy.escalate_to or []:
                if escalation_platform(target) != platform:
                    raise ValueError(
                        f"{prefix}: escalate_to {target!r} can't be mentioned in {platform}: "
                        f"use {_ESCALATION_FORMS[platform]}"
                    )
        return value


def checked_cron(value: str) -> str:
    """Checked at load, not first at `bot clock`: a typo must fail every command that reads
    the settings, so a deploy catches it before the clock process crash-loops on it."""
    try:
        trigger = cron_trigger(value, UTC)
    except ValueError as exc:
        raise ValueError(f"not a valid cron expression: {exc}") from None
    if trigger.get_next_fire_time(None, datetime.now(UTC)) is None:
        raise ValueError("this schedule never runs: no date has that day in those months")
    return value


class InsightSettings(_Section):
    """The answer log and `bot report`."""

    retention_days: float = Field(180, gt=0)  # older log entries are deleted by the clock
    store_questions: bool = True  # false: only a hash of each question is kept
    expire_schedule: str = "43 3 * * *"  # when `bot clock` deletes expired entries (cron)
    # The model's list price in US dollars per million tokens, for the report's cost column.
    input_usd_per_mtok: float | None = Field(None, ge=0)
    output_usd_per_mtok: float | None = Field(None, ge=0)
    # Knowledge gaps: questions closer than this (cosine distance, average linkage) are one gap.
    gap_distance: float = Field(0.8, gt=0, lt=2)
    gap_examples: int = Field(3, ge=1, le=20)  # example questions shown per gap
    gap_passages: int = Field(2, ge=0, le=10)  # closest existing passages shown per gap
    # Grouping compares every pair of questions (time and memory grow with the square of their
    # number: 56,000 distinct ones asked for 12 GB), so only the most asked, then the most
    # recent, are grouped; the rest are counted in the report, not grouped.
    gap_max_questions: int = Field(2_000, ge=2, le=20_000)
    # Gaps listed, biggest first: each costs a search for its closest passages.
    gap_max_listed: int = Field(100, ge=1, le=1_000)
    # Answers `bot report` reads from the log at a time: it folds each page into its figures,
    # so its memory holds one page, not the whole window (at most Elasticsearch's default
    # max_result_window, the largest page a scroll returns).
    log_page_size: int = Field(5_000, ge=1, le=10_000)
    report_top: int = Field(10, ge=1, le=100)  # rows in each "most/never cited" table
    # Answers whose cited passages changed: re-asked and updated in their threads by `bot
    # clock` on recheck_schedule (and by `bot stale-answers --notify`).
    notify_stale: bool = False
    recheck_schedule: str = "*/30 * * * *"

    @field_validator("expire_schedule", "recheck_schedule")
    @classmethod
    def _valid_cron(cls, value: str) -> str:
        return checked_cron(value)


class KeywordSettings(_Section):
    derived_max: int = Field(5, ge=1, le=20)
    max_per_document: int = Field(30, ge=1, le=1_000)
    prune_schedule: str = "17 3 * * *"
    timezone: str = "UTC"
    unused_days: float = Field(90, gt=0)
    min_age_days: float = Field(30, gt=0)
    min_uses: int = Field(2, ge=0)
    down_votes: int = Field(2, ge=1)
    # Whole seconds: APScheduler refuses anything else, and only once `bot clock` starts.
    misfire_grace_s: int = Field(300, ge=1)
    # `bot clock` stopping: runs under way get this long to finish, then are cancelled and get
    # as long again to unwind (their run locks released).
    shutdown_grace_s: float = Field(4.0, gt=0, le=3_600)
    lock_ttl_s: float = Field(3_600, gt=0)
    settle_s: float = Field(600, ge=0)

    @model_validator(mode="after")
    def _claims_outlive_late_starts(self) -> KeywordSettings:
        if self.lock_ttl_s <= self.misfire_grace_s:
            raise ValueError(
                "lock_ttl_s must be longer than misfire_grace_s, or a clock starting late "
                "could claim a run another clock already did"
            )
        return self

    @field_validator("prune_schedule")
    @classmethod
    def _valid_cron(cls, value: str) -> str:
        return checked_cron(value)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                "unknown time zone; use an IANA name such as UTC or Europe/Paris"
            ) from None
        return value

    @property
    def unused_s(self) -> float:
        return self.unused_days * _DAY_S

    @property
    def min_age_s(self) -> float:
        return self.min_age_days * _DAY_S


class _Draining(_Section):
    """How a chat process stops (SIGTERM: a deploy, a restart), the same on both platforms."""

    # Answers in progress get `shutdown_grace_s` to finish, then the rest are cut short with an
    # apology, sent within `apology_deadline_s`; together under the platform's stop timeout
    # (Heroku: 30 s), or the process is killed first and the askers are left waiting.
    shutdown_grace_s: float = Field(20.0, ge=0, le=3_600)
    apology_deadline_s: float = Field(5.0, gt=0, le=600)


class _ThreadReading(_Section):
    """How much of a thread read back from the platform goes to the model, on either one."""

    # Each message read back is cut to this: one pasted log would otherwise take the whole
    # `answers.history_token_budget`, and the engine drops a turn over it with every older one.
    history_message_chars: int = Field(2_000, ge=100, le=100_000)
    # Asked in a thread it was not part of, the bot reads what people said there as one turn
    # of this many characters at most: well under `answers.history_token_budget` (4,000
    # tokens, 4 characters each as the engine counts them): over it, the engine keeps only the
    # turn's start, and the latest messages are at its end.
    thread_context_chars: int = Field(6_000, ge=500, le=100_000)


class LeftoverSettings(_Section):
    """Placeholders left by a Slack process killed mid-answer (SIGKILL, OOM, a host crash, a
    container killed past its stop timeout), apologised for by the next process
    (`adapters/slack/leftovers`). A placeholder is another process's to replace while that
    process is alive (it beats every `heartbeat_s`) and younger than `max_answer_s`."""

    heartbeat_s: float = Field(15.0, gt=0, le=3_600)
    # A process not heard from for this long is gone: its placeholders (this old at least)
    # are apologised for. Above `heartbeat_s` with room for a slow store write.
    owner_silent_s: float = Field(60.0, gt=0, le=86_400)
    # No answer runs longer: an older placeholder is apologised for even while its process
    # still beats (an answer stuck for good). Answers take seconds to minutes (answers.max_rounds
    # model turns, each within its timeout and retries), so an hour is far from any of them.
    max_answer_s: float = Field(3_600.0, gt=0, le=7 * 86_400)
    # While running, a process looks for leftovers again this often (0: only at start): one
    # killed while its replacement was starting is still within `owner_silent_s` then.
    sweep_interval_s: float = Field(60.0, ge=0, le=86_400)
    limit: int = Field(50, ge=1, le=1_000)  # placeholders apologised for per look, oldest first

    @model_validator(mode="after")
    def _silence_outlasts_heartbeats(self) -> LeftoverSettings:
        if self.owner_silent_s <= 2 * self.heartbeat_s:
            raise ValueError(
                "owner_silent_s must be more than twice heartbeat_s: a live process that "
                "missed one heartbeat would pass for gone, and its answers be apologised for"
            )
        if self.max_answer_s < self.owner_silent_s:
            raise ValueError("max_answer_s must not be under owner_silent_s")
        return self


class SlackSettings(_ThreadReading, _Draining):
    port: int = Field(3000, ge=1, le=65_535)
    base_url: HttpUrlText | None = None
    section_chars: int = Field(3_000, ge=100, le=3_000)
    message_chars: int = Field(12_000, ge=500, le=40_000)
    max_blocks: int = Field(50, ge=3, le=50)
    max_sources: int = Field(10, ge=1, le=10)
    plain_chars: int = Field(3_900, ge=100, le=40_000)
    # A thread read back from Slack (when our store has none of it): its first message and the
    # latest ones, at most `history_messages` in all, one page of that size per call.
    history_messages: int = Field(50, ge=1, le=1_000)
    # conversations.replies returns a thread oldest first, so the latest messages of a long one
    # are pages away; each page is a call, and apps outside the Marketplace get about one a
    # minute: a rate-limited page ends the reading with what was read.
    history_pages: int = Field(5, ge=1, le=50)
    dedup_ttl_s: float = Field(86_400, gt=0)
    placeholder: str = Field("_Looking through the docs…_", min_length=1, max_length=200)
    update_interval_s: float = Field(1.0, ge=0)
    stream_api: bool = True
    # GET /readyz looks at the index at most this often (the port is public; the look scans).
    readiness_cache_s: float = Field(5.0, ge=0, le=3_600)
    host: str = "0.0.0.0"  # noqa: S104 (a server behind the platform's router)
    body_read_deadline_s: float = Field(10.0, gt=0, le=600)
    idle_connection_s: float = Field(15.0, gt=0, le=3_600)
    # A refused request's unread body is read and dropped this long, so its sender sees the
    # status rather than a reset, then the connection closes (aiohttp's own default: 10 s).
    refused_linger_s: float = Field(1.0, ge=0, le=60)
    rate_limited_wait_s: float = Field(30.0, gt=0, le=3_600)
    max_body_bytes: int = Field(1_000_000, ge=1_000, le=50_000_000)
    auth_check_at_start: bool = True
    reaction_trigger: str = Field("question", pattern=r"^[a-z0-9_+'-]{1,64}$")
    native_feedback: bool = True
    suggested_prompts: list[str] = Field(
        default_factory=lambda: [
            "How do I get started?",
            "Where is this documented?",
            "What changed recently?",
        ],
        max_length=4,
    )
    agent_status: str = Field("is looking through the docs…", min_length=1, max_length=50)
    agent_loading_messages: list[str] = Field(
        default_factory=lambda: [
            "Searching the docs…",
            "Reading the passages…",
            "Checking the sources…",
        ],
        max_length=10,
    )
    agent_title_chars: int = Field(60, ge=10, le=255)
    agent_context_users: int = Field(10_000, ge=1)
    leftovers: LeftoverSettings = LeftoverSettings()


class DiscordSettings(_ThreadReading, _Draining):
    description_chars: int = Field(4_096, ge=100, le=4_096)
    reaction_trigger: str = Field("❓", min_length=1, max_length=64)
    solved_tag: str = Field("Solved", min_length=1, max_length=20)
    lock_solved: bool = False
    max_sources: int = Field(10, ge=1, le=10)
    history_messages: int = Field(50, ge=1, le=100)
    dedup_ttl_s: float = Field(86_400, gt=0)
    # Discord honours an interaction's token for 15 minutes (900 s): past this, a command's
    # reply goes in its channel with the bot token; the rest is a margin for the sends.
    interaction_reply_s: float = Field(840, gt=0, le=900)


DEFAULT_METRICS_PATH = "/metrics"
# The probes a chat process serves: the process is up; a question asked now can be answered.
HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"


class MetricsSettings(_Section):
    """Prometheus metrics (`core.metrics`)."""

    # where metrics are served; null: not by the Slack HTTP server (the port's server, when
    # on, serves them at /metrics then)
    path: str | None = Field(DEFAULT_METRICS_PATH, pattern=r"^/[A-Za-z0-9/_-]*$")
    port: int | None = Field(None, ge=1, le=65535)  # `bot discord` / `bot clock`; null: off
    host: str = "127.0.0.1"  # where that port listens: loopback unless a scraper is elsewhere
    idle_connection_s: float = Field(15.0, gt=0, le=3_600)  # that port's: see slack's
    refused_linger_s: float = Field(1.0, ge=0, le=60)  # that port's: see slack's


class LoggingSettings(_Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    format: Literal["console", "json"] = "console"


class Secrets(_Section):
    anthropic_api_key: SecretStr | None = None
    openai_api_key: SecretStr | None = None
    perplexity_api_key: SecretStr | None = None
    slack_bot_token: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    discord_token: SecretStr | None = None
    elasticsearch_api_key: SecretStr | None = None
    elasticsearch_password: SecretStr | None = None


# How the history budget counts text: a rough, conservative estimate for English prose.
CHARS_PER_TOKEN = 4


class Settings(_Section):
    storage: StorageSettings = StorageSettings()
    search: SearchSettings = SearchSettings()
    embeddings: EmbeddingSettings = EmbeddingSettings()
    elasticsearch: ElasticsearchSettings = ElasticsearchSettings()
    ingest: IngestSettings = IngestSettings()
    answers: AnswerSettings = AnswerSettings()
    anthropic: AnthropicSettings = AnthropicSettings()
    openai: OpenAICompatibleSettings = OpenAICompatibleSettings()
    web_search: WebSearchSettings = WebSearchSettings()
    channels: ChannelSettings = ChannelSettings()
    keywords: KeywordSettings = KeywordSettings()
    insights: InsightSettings = InsightSettings()
    sources: dict[str, SourceSettings] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _thread_context_within_history(self) -> Settings:
        budget = self.answers.history_token_budget * CHARS_PER_TOKEN
        for name, platform in (("slack", self.slack), ("discord", self.discord)):
            if platform.thread_context_chars >= budget:
                raise ValueError(
                    f"{name}.thread_context_chars ({platform.thread_context_chars:,}) must be "
                    f"under answers.history_token_budget in characters ({budget:,}, "
                    f"{CHARS_PER_TOKEN} a token), or the thread's latest messages would be cut "
                    "from the history"
                )
        return self

    @field_validator("sources")
    @classmethod
    def _source_names(cls, value: dict[str, SourceSettings]) -> dict[str, SourceSettings]:
        for name in value:
            if (problem := source_name_problem(name)) is not None:
                raise ValueError(problem)
            if name == LEARNED_SOURCE:
                raise ValueError(
                    f"{name!r} is the label of what the bot learns from the web: a source of "
                    "that name would prune it; name the source otherwise"
                )
        return value

    @model_validator(mode="after")
    def _a_server_needs_a_model(self) -> Settings:
        """A server alone named no model to ask: where it would answer (no Claude key, or
        `answers.provider: openai`), every answer fell back to quoted passages, silently."""
        o, provider = self.openai, self.answers.provider
        asked = provider == "openai" or (
            provider == "auto" and self.secrets.anthropic_api_key is None
        )
        if o.base_url is not None and o.model is None and asked:
            raise ValueError(
                "openai.base_url is set without openai.model: set it to the model's name on "
                "that server (its /v1/models lists them)"
            )
        return self

    @model_validator(mode="after")
    def _one_file_per_store(self) -> Settings:
        """The index, the state and the embedding cache in one file: the index's tables were
        written into the state file, which no ingest can make again."""
        files = {
            "search.sqlite_path": self.index_path,
            "storage.data_dir's state.sqlite": self.state_path,
            "embeddings.cache_path": self.embedding_cache_path,
        }
        seen: dict[Path, str] = {}
        for name, path in files.items():
            where = Path(os.path.abspath(path))
            if where in seen:
                raise ValueError(
                    f"{name} and {seen[where]} are one file ({path}): give each its own"
                )
            seen[where] = name
        return self

    @model_validator(mode="after")
    def _sources_own_their_labels(self) -> Settings:
        """A source's sync prunes every document of its label: one named as `bot ingest`
        labels what it ingests would delete all of that on every sync."""
        if self.ingest.default_source in self.sources:
            raise ValueError(
                f"source {self.ingest.default_source!r} has the label `bot ingest` gives what it "
                "ingests without --source (ingest.default_source): each sync would prune all of "
                "that; name the source otherwise"
            )
        return self

    slack: SlackSettings = SlackSettings()
    discord: DiscordSettings = DiscordSettings()
    logging: LoggingSettings = LoggingSettings()
    metrics: MetricsSettings = MetricsSettings()
    secrets: Secrets = Field(default_factory=Secrets)

    def policy(self, key: str) -> ResolvedPolicy:
        """The policy of the channel a conversation key is in: `channels.default`, overridden
        key by key by each matching `channels.policies` entry, most specific last. Web search
        also follows the older `web_search.enabled` / `web_search.channels`, unless a policy
        says `web_search` itself."""
        # The built-in default first: a `channels.default` written out without a key (an older
        # config.yaml, one env override) keeps that key's default rather than turning it off.
        merged = BUILT_IN_CHANNEL_POLICY.model_dump()
        merged.update(self.channels.default.model_dump(exclude_none=True))
        matched = []
        said = None  # `web_search` said for this channel: by a policy entry, not the default
        for prefix, policy in sorted(
            self.channels.policies.items(), key=lambda item: item[0].count("/")
        ):
            if key == prefix or key.startswith(prefix + "/"):
                merged.update(policy.model_dump(exclude_none=True))
                matched.append(prefix)
                said = said if policy.web_search is None else policy.web_search
        web = merged["web_search"]
        listed = most_specific(self.web_search.channels, key)
        if said is None and web is None and listed:
            said = listed[-1]
        if web is None:
            web = [self.web_search.enabled, *listed][-1]
        return ResolvedPolicy(
            trigger=merged["trigger"] or "mention",
            questions_only=bool(merged["questions_only"]),
            answer_only_when_grounded=bool(merged["answer_only_when_grounded"]),
            sources=tuple(merged["sources"] or ()),
            web_search=bool(web),
            matched=tuple(matched),
            # `channels.default` may name both platforms' targets: each mentions its own.
            escalate_to=tuple(
                target
                for target in merged["escalate_to"] or ()
                if _platform_of(key) not in _ESCALATION_TARGETS
                or escalation_platform(target) == _platform_of(key)
            ),
            private=bool(merged["private"]),
            reactions=bool(merged["reactions"]),
            min_relevance=float(merged["min_relevance"] or 0.0),
            followups=merged["followups"] or "questions",
            learned=said is not False,
        )

    def web_search_reach(self) -> WebSearchReach:
        """Where web search is on, as each conversation's own policy resolves it (`policy`,
        where a policy's `web_search` overrides the `web_search` section): at every prefix an
        entry names, and in a conversation no entry names. The provider, and its key, are
        needed only where some conversation resolves to on."""
        named = {*self.web_search.channels, *self.channels.policies}
        resolved = {prefix: self.policy(prefix).web_search for prefix in named}
        return WebSearchReach(
            everywhere=self.policy(_NAMED_BY_NO_ENTRY).web_search,
            on=tuple(sorted(p for p, on in resolved.items() if on)),
            off=tuple(sorted(p for p, on in resolved.items() if not on)),
        )

    @property
    def index_path(self) -> Path:
        return self.search.sqlite_path or self.storage.data_dir / "index.sqlite"

    @property
    def state_path(self) -> Path:
        return self.storage.data_dir / "state.sqlite"

    @property
    def embedding_cache_path(self) -> Path:
        return self.embeddings.cache_path or self.storage.data_dir / "embedding-cache.sqlite"
