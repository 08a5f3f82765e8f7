"""Connecting to Elasticsearch: the client from settings, and the checks that make a bad
connection fail at start with a message a person can act on, not at the first question.

What goes wrong in practice, and what each check says:
- nothing listens at the URL (or DNS/TLS fails): "can't reach";
- the credentials are wrong (401) or lack a privilege (403): which variable to fix;
- the server's major version differs from the client's: an 8.x client against a 9.x cluster
  (or the reverse) fails on the first request with an opaque 400, so we refuse to start and name
  the client version to install instead;
- `elasticsearch.ca_certs` is no PEM file of certificates: the setting, not a TLS traceback.

Any other refusal is quoted with the server's own reason (the root cause, one bounded line,
never the document's text); an index block (write block, read-only, flood-stage watermark) is
named as such, not as a missing privilege.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import elasticsearch
from elastic_transport import ConnectionError as TransportConnectionError
from elastic_transport import ConnectionTimeout, TlsError, TransportError
from elasticsearch import (
    ApiError,
    AsyncElasticsearch,
    AuthenticationException,
    AuthorizationException,
    UnsupportedProductError,
)

from core.config import ElasticsearchSettings, Secrets
from core.domain.text import clip
from core.domain.urls import redact_url, redact_urls_in
from core.errors import IndexUnavailable, SearchIndexError

CLIENT_VERSION = str(elasticsearch.__dict__["__versionstr__"])
CLIENT_MAJOR = int(CLIENT_VERSION.split(".", 1)[0])
# Statuses the transport retries by itself (with backoff between nodes).
_RETRY_STATUSES = (429, 502, 503, 504)
# Licences under which the server-side `rrf` retriever is allowed.
RRF_LICENCES = frozenset({"platinum", "enterprise", "trial"})
# The most of a server's reason a message quotes: a mapping conflict or a missing privilege
# fits; a runaway one does not flood the line.
_REASON_CHARS = 300
# Where Elasticsearch starts quoting the document in a parse failure: the text is never shown.
_PREVIEW = "Preview of field's value"
# The error of a request an index block refused: a write block, a read-only index, or the
# read-only-allow-delete block of a disk past the flood-stage watermark (403, or 429 for that).
_BLOCKED = "cluster_block_exception"
# What a status says when the server (or a proxy before it) gave no reason.
_STATUS_HINTS: dict[int, str] = {
    HTTPStatus.REQUEST_ENTITY_TOO_LARGE: (
        "the request was too large: lower elasticsearch.bulk_chunk_size, or raise the "
        "cluster's http.max_content_length (and any proxy's body limit)"
    ),
}


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    name: str
    version: str
    major: int


def build_client(settings: ElasticsearchSettings, secrets: Secrets) -> AsyncElasticsearch:
    """The official async client, configured from settings and secrets; no request is made."""
    kwargs: dict[str, Any] = {
        "request_timeout": settings.request_timeout_s,
        "max_retries": settings.max_retries,
        "retry_on_timeout": settings.retry_on_timeout,
        "retry_on_status": _RETRY_STATUSES,
        "verify_certs": settings.verify_certs,
    }
    if settings.cloud_id:
        kwargs["cloud_id"] = settings.cloud_id
    elif settings.url:
        kwargs["hosts"] = [settings.url]
    else:
        raise SearchIndexError(
            "search.backend is elasticsearch, but neither elasticsearch.url nor "
            "elasticsearch.cloud_id is set (or ELASTICSEARCH_URL / ELASTICSEARCH_CLOUD_ID)"
        )
    if settings.ca_certs is not None:
        if not settings.ca_certs.exists():
            raise SearchIndexError(f"elasticsearch.ca_certs: {settings.ca_certs} does not exist")
        kwargs["ca_certs"] = str(settings.ca_certs)
    if settings.ssl_assert_fingerprint:
        kwargs["ssl_assert_fingerprint"] = settings.ssl_assert_fingerprint
    if secrets.elasticsearch_api_key is not None:
        kwargs["api_key"] = secrets.elasticsearch_api_key.get_secret_value()
    elif settings.username:
        if secrets.elasticsearch_password is None:
            raise SearchIndexError(
                f"elasticsearch.username is {settings.username!r} but ELASTICSEARCH_PASSWORD "
                "is not set"
            )
        kwargs["basic_auth"] = (
            settings.username,
            secrets.elasticsearch_password.get_secret_value(),
        )
    try:
        return AsyncElasticsearch(**kwargs)
    except ValueError as exc:  # a URL without scheme, TLS options on http://, a bad Cloud ID
        # The client quotes an unparsable URL whole, password and all.
        raise SearchIndexError(f"elasticsearch settings: {redact_urls_in(str(exc))}") from None
    except ssl.SSLError as exc:  # the CA file is read as the client is made
        if settings.ca_certs is None:
            raise SearchIndexError(f"elasticsearch TLS settings: {exc}") from None
        raise SearchIndexError(
            f"elasticsearch.ca_certs: {settings.ca_certs} holds no CA certificate in PEM "
            f"form ({exc.reason or exc}); a DER file must be converted first: openssl x509 "
            "-inform der -in FILE -out FILE.pem"
        ) from None
    except OSError as exc:  # unreadable: permissions, a directory without certificates
        raise SearchIndexError(
            f"elasticsearch.ca_certs: {settings.ca_certs} can't be read ({exc.strerror or exc})"
        ) from None


def where(settings: ElasticsearchSettings) -> str:
    """The cluster's address for messages (never with credentials)."""
    if settings.cloud_id:
        return f"Elastic Cloud deployment {settings.cloud_id.split(':', 1)[0]!r}"
    return redact_url(settings.url or "?")


def server_cause(exc: ApiError) -> tuple[str, str]:
    """(type, reason) of what the server said went wrong: the root cause of an error body,
    else the first failure of a by-query response (which carries no error object); empty
    when the body says nothing (a proxy's bare 413, an HTML page)."""
    body = exc.body
    cause: object = None
    if isinstance(body, dict):
        error = body.get("error")
        failures = body.get("failures")
        if isinstance(error, dict):
            roots = error.get("root_cause")
            cause = roots[0] if isinstance(roots, list) and roots else error
        elif isinstance(error, str):
            cause = {"reason": error}
        elif isinstance(failures, list) and failures and isinstance(failures[0], dict):
            cause = failures[0].get("cause")
    if not isinstance(cause, dict):
        return "", ""
    return str(cause.get("type") or ""), str(cause.get("reason") or "")


def described(kind: str, reason: str) -> str:
    """A server's error type and reason as one bounded line, without any document text a
    parse failure quotes or credentials a URL in it carries."""
    reason = reason.split(_PREVIEW, 1)[0].strip()
    text = ": ".join(part for part in (kind, reason) if part)
    return clip(redact_urls_in(text), _REASON_CHARS)


def blocked(at: str, said: str) -> SearchIndexError:
    """An index block is no missing privilege: say which block it can be and how it lifts."""
    return SearchIndexError(
        f"Elasticsearch at {at} refused the request because the index is blocked ({said}): "
        "a write block or a read-only index (lift it with PUT <index>/_settings "
        '{"index.blocks.write": null}, or "index.blocks.read_only": null), or a disk past the '
        "flood-stage watermark (free disk space: that block lifts by itself)"
    )


def by_query_failure(
    body: dict[str, Any], settings: ElasticsearchSettings
) -> SearchIndexError | None:
    """A delete by query that answered, yet failed to delete some documents: one error for
    the first failure (None when there was none)."""
    failures = body.get("failures")
    if not isinstance(failures, list) or not failures or not isinstance(failures[0], dict):
        return None
    cause = failures[0].get("cause")
    cause = cause if isinstance(cause, dict) else {}
    kind = str(cause.get("type") or "")
    said = described(kind, str(cause.get("reason") or ""))
    at = where(settings)
    if kind == _BLOCKED:
        return blocked(at, said)
    return SearchIndexError(
        f"Elasticsearch at {at} failed to delete {len(failures)} entries: "
        f"{said or 'no reason given'}"
    )


def _what_it_said(exc: ApiError) -> str:
    said = described(*server_cause(exc))
    if said:
        return said
    return _STATUS_HINTS.get(exc.meta.status, "no reason given")


def explain(exc: Exception, settings: ElasticsearchSettings) -> SearchIndexError:
    """Turn a client exception into our error with a reason a person can act on (and without
    any credentials a URL in the client's message may carry)."""
    at = where(settings)
    reason = redact_urls_in(_innermost(exc))
    if isinstance(exc, ConnectionTimeout):
        return IndexUnavailable(f"Elasticsearch at {at} did not answer in time: {reason}")
    if isinstance(exc, TlsError):
        return IndexUnavailable(
            f"TLS to Elasticsearch at {at} failed ({reason}); set elasticsearch.ca_certs to the "
            "CA that signed its certificate, or elasticsearch.ssl_assert_fingerprint"
        )
    if isinstance(exc, TransportConnectionError):
        return IndexUnavailable(
            f"can't reach Elasticsearch at {at}: {reason}; check elasticsearch.url or "
            "elasticsearch.cloud_id (ELASTICSEARCH_URL, ELASTICSEARCH_CLOUD_ID) and that the "
            "cluster is running"
        )
    if isinstance(exc, AuthenticationException):
        return SearchIndexError(
            f"Elasticsearch at {at} refused the credentials (401): check ELASTICSEARCH_API_KEY, "
            "or elasticsearch.username and ELASTICSEARCH_PASSWORD"
        )
    if isinstance(exc, ApiError) and server_cause(exc)[0] == _BLOCKED:
        return blocked(at, _what_it_said(exc))
    if isinstance(exc, AuthorizationException):
        return SearchIndexError(
            f"Elasticsearch at {at} refused the request (403): the user or API key needs the "
            f"privileges to manage and write the bot's indices ({_what_it_said(exc)})"
        )
    if isinstance(exc, UnsupportedProductError):
        return SearchIndexError(
            f"the server at {at} is not Elasticsearch (or an unsupported build)"
        )
    if isinstance(exc, ApiError):
        return SearchIndexError(
            f"Elasticsearch at {at} answered {exc.meta.status}: {_what_it_said(exc)}"
        )
    return SearchIndexError(f"Elasticsearch at {at}: {reason}")


def _innermost(exc: Exception) -> str:
    """What failed, once: after its retries the client's text nests every attempt's ("Connection
    error caused by: ConnectionError(Connection error caused by: ClientConnectorError(...))"),
    while a transport error's `message` keeps the cause of the last one."""
    if isinstance(exc, TransportError) and isinstance(exc.message, str) and exc.message:
        return exc.message
    return str(exc)


@contextmanager
def explained(settings: ElasticsearchSettings) -> Iterator[None]:
    """Any client failure inside becomes one `SearchIndexError` with a reason a person can act on;
    our own errors pass through unchanged (never wrapped twice)."""
    try:
        yield
    except SearchIndexError:
        raise
    except Exception as exc:
        raise explain(exc, settings) from exc


@contextmanager
def checking(check: str) -> Iterator[None]:
    """A failure inside is `bot doctor`'s row `check` (unless an inner step named its own; a
    cluster gone away is the connection's, whatever step found it)."""
    try:
        yield
    except SearchIndexError as exc:
        if exc.check is None:
            exc.check = "connection" if isinstance(exc, IndexUnavailable) else check
        raise


def check_major(server_version: str, settings: ElasticsearchSettings) -> int:
    head = server_version.split(".", 1)[0]
    if not (head.isascii() and head.isdigit()):
        raise SearchIndexError(
            f"the server at {where(settings)} reports version {server_version!r}, which is "
            "no Elasticsearch version: check that elasticsearch.url (or ELASTICSEARCH_URL) "
            "names the cluster"
        )
    major = int(head)
    if major != CLIENT_MAJOR:
        raise SearchIndexError(
            f"Elasticsearch at {where(settings)} is version {server_version}, but this bot has "
            f"the {CLIENT_MAJOR}.x client ({CLIENT_VERSION}); install the "
            f"matching client: pip install 'elasticsearch[async]>={major},<{major + 1}'"
        )
    return major


async def connect(client: AsyncElasticsearch, settings: ElasticsearchSettings) -> ClusterInfo:
    """One request that proves the address, the credentials and the version are right."""
    try:
        info = await client.info()
    except Exception as exc:
        failure = explain(exc, settings)
        failure.check = "connection"
        raise failure from exc
    version = str(info["version"]["number"])
    with checking("version"):
        major = check_major(version, settings)
    return ClusterInfo(str(info.get("cluster_name", "?")), version, major)


async def licence(client: AsyncElasticsearch) -> tuple[str, str]:
    """(type, status) of the cluster's licence; ("unknown", reason) when it can't be read."""
    try:
        response = await client.license.get()
    except ApiError as exc:
        return "unknown", f"{exc.meta.status} {exc.message}"
    body = response.body.get("license", {})
    return str(body.get("type", "unknown")), str(body.get("status", "unknown"))


def allows_server_rrf(licence_type: str, status: str) -> bool:
    return licence_type in RRF_LICENCES and status == "active"
