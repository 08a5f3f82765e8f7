"""URLs as people may see them: without the `user:password@` a URL can carry.

A URL with credentials in it (`http://elastic:secret@host:9200`, `https://user:pass@wiki/page`)
must never reach a log line, an error message, a stored citation or `bot doctor`. Both helpers
work on plain strings, so they never raise, even on a URL no parser accepts (`http://u:p@[bad`):
that is exactly the URL that ends up in an error message.

The authority ends at the first `/`, `\\`, `?` or `#` (as urllib3 and browsers read it) and the
credentials end at its last `@`, so `https://medium.com/@user/post` is left alone.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from urllib.parse import urlsplit

# `scheme://` followed by userinfo up to the authority's last "@". In running text the
# authority also ends at whitespace or a quote, so the match never spans two URLs.
_USERINFO_IN_TEXT = re.compile(r"://[^/\\?#\s'\"<>]*@")
# A URL written without a scheme (`user:pass@host:9200`, `//user:pass@host`): userinfo from
# the start, after the `//` when there is one.
_LEADING_USERINFO = re.compile(r"^(//)?[^/\\?#]*@")
_LOCAL_SUFFIXES = (".localhost", ".local", ".internal", ".lan", ".home.arpa")
# Characters a URL never holds unencoded (RFC 3986; a browser encodes them before sending).
# In a source's URL they are a web page's trick, not an address: `<` and `>` build Slack
# control sequences (`https://evil.example/a<!channel>`) and end Markdown `<url>` targets, `"`
# ends an HTML attribute, and a backslash is read as `/` by browsers but not by our checks.
_NEVER_IN_URL = frozenset('<>"\\')


def redact_urls_in(text: str) -> str:
    """`text` with the userinfo removed from every `scheme://user:pass@host` in it: for error
    messages and log lines that embed a URL (a client library's exception, a crawl log)."""
    return _USERINFO_IN_TEXT.sub("://", text)


def redact_url(url: str) -> str:
    """One URL without its userinfo, everything else (scheme, host, port, path, query,
    fragment) unchanged; a URL without a scheme loses a leading `user:pass@` too."""
    if "://" in url:
        return redact_urls_in(url)
    return _LEADING_USERINFO.sub(r"\1", url)


def is_local_url(url: str | None) -> bool:
    """Whether `url` names a server on this machine or its private network: `localhost`, a
    loopback or private address, a `.local`/`.internal` name, or a single-label name (a
    Docker Compose service such as `http://ollama:11434`). Such a server is usually a model
    running on CPU, which needs far longer per reply than a hosted API."""
    if not url:
        return False
    try:
        host = (urlsplit(url).hostname or "").rstrip(".")
    except ValueError:
        return False
    if not host:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return "." not in host or host == "localhost" or host.endswith(_LOCAL_SUFFIXES)
    return address.is_private or address.is_loopback or address.is_link_local


def is_linkable(url: str) -> bool:
    """Whether a source's URL may be shown as a link at all: http(s) with a host, no userinfo
    (`https://docs.example.com@evil.example/` goes to evil.example), nothing invisible or
    blank in it, nor a character no URL carries unencoded (`_NEVER_IN_URL`); or the
    `file:///path` our ingest gives a local file ingested without `--base-url`, which points
    at the team's own copy. Anything else (javascript:, data:, a file URL naming a host) is
    shown as text, never linked."""
    if any(
        c.isspace() or c in _NEVER_IN_URL or unicodedata.category(c) in ("Cc", "Cf") for c in url
    ):
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    if parts.scheme == "file":
        # `file:////host/share` names a host too: a UNC path, opened over SMB.
        return not parts.netloc and parts.path.startswith("/") and not parts.path.startswith("//")
    return parts.scheme in ("http", "https") and bool(parts.hostname) and "@" not in parts.netloc
