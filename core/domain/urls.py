"""URLs as people may see them: without the `user:password@` a URL can carry.

A URL with credentials in it (`http://elastic:secret@host:9200`, `https://user:pass@wiki/page`)
must never reach a log line, an error message, a stored citation or `bot doctor`. Both helpers
work on plain strings, so they never raise, even on a URL no parser accepts (`http://u:p@[bad`):
that is exactly the URL that ends up in an error message.

The authority ends at the first `/`, `\\`, `?` or `#` (as urllib3 and browsers read it) and the
credentials end at its last `@`, so `https://medium.com/@user/post` is left alone.
"""

from __future__ import annotations

import re

# `scheme://` followed by userinfo up to the authority's last "@". In running text the
# authority also ends at whitespace or a quote, so the match never spans two URLs.
_USERINFO_IN_TEXT = re.compile(r"://[^/\\?#\s'\"<>]*@")
# A URL written without a scheme (`user:pass@host:9200`, `//user:pass@host`): userinfo from
# the start, after the `//` when there is one.
_LEADING_USERINFO = re.compile(r"^(//)?[^/\\?#]*@")


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
