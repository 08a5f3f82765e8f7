"""URL targets that can't be fetched: a malformed one is told from a path and named with why,
and whatever one request raises (httpx's errors, the socket layer's, anyio's ExceptionGroup)
becomes that URL's skip reason, readable even when the exception has no message."""

from __future__ import annotations

import httpx
import pytest

from core.errors import UnreachableDocument, UnreadableDocument
from core.ingest.address_guard import FetchStart
from core.ingest.sources import (
    SourceItem,
    _redirect_refused,
    fetch_failure,
    fetch_url,
    is_url,
    url_problem,
)

TIMEOUT = httpx.Timeout(3)


@pytest.mark.parametrize(
    ("target", "meant_as_url"),
    [
        ("https://docs.example.com/a", True),
        ("HTTP://docs.example.com/a", True),
        ("http://[::1", True),  # urlparse raises on it; it is still a URL, a malformed one
        ("http://u:p@[bad", True),
        ("docs/guide.md", False),
        ("ftp://files.example.com/a", False),
        ("", False),
    ],
)
def test_a_url_is_told_from_a_path_without_raising(target: str, meant_as_url: bool) -> None:
    assert is_url(target) is meant_as_url


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("https://docs.example.com:8443/a", None),
        ("http://[::1]:8080/", None),
        ("http://127.0.0.1:99999/x", "not a valid URL: port out of range 0-65535"),
        (
            "http://127.0.0.1:-1/x",
            "not a valid URL: port could not be cast to integer value as '-1'",
        ),
        ("http://[::1", "not a valid URL: invalid IPv6 URL"),
        ("http://host:abc/", "not a valid URL: port could not be cast to integer value as 'abc'"),
        ("http:///path", "not a valid URL: no host"),
    ],
)
def test_a_url_that_cannot_be_requested_says_why(url: str, problem: str | None) -> None:
    assert url_problem(url) == problem


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (httpx.ReadTimeout(""), "read timed out after 3 s (ingest.url_timeout_s)"),
        (httpx.ConnectTimeout(""), "connect timed out after 3 s (ingest.url_timeout_s)"),
        (httpx.RemoteProtocolError(""), "remote protocol error"),
        (httpx.ConnectError("[Errno 111] refused"), "ConnectError: [Errno 111] refused"),
        (
            ExceptionGroup(
                "unhandled errors in a TaskGroup", [OverflowError("port must be 0-65535")]
            ),
            "OverflowError: port must be 0-65535",
        ),
        (ExceptionGroup("two", [OSError("a"), ExceptionGroup("b", [OSError("a")])]), "OSError: a"),
        (RuntimeError("a bug"), None),  # not a request's failure: let through
        (ExceptionGroup("mixed", [OSError("a"), KeyError("bug")]), None),
    ],
)
def test_a_failed_request_has_a_readable_reason(exc: BaseException, reason: str | None) -> None:
    assert fetch_failure(exc, TIMEOUT) == reason


async def test_an_exception_group_from_the_transport_is_that_urls_skip_reason() -> None:
    """anyio's connect raises an ExceptionGroup (an OverflowError inside, for a port the socket
    layer refuses): one URL's failure, not the run's."""

    def refuse(request: httpx.Request) -> httpx.Response:
        raise ExceptionGroup("unhandled errors in a TaskGroup", [OverflowError("bad port")])

    url = "http://docs.example.com/a"
    async with httpx.AsyncClient(transport=httpx.MockTransport(refuse), timeout=TIMEOUT) as http:
        with pytest.raises(UnreadableDocument) as caught:
            await fetch_url(SourceItem(url, url, url, "A"), 1000, http)
    assert str(caught.value) == f"can't fetch {url}: OverflowError: bad port"


@pytest.mark.parametrize(
    ("failure", "for_now"),
    [
        (httpx.ConnectError("[Errno 111] refused"), True),
        (httpx.ReadTimeout(""), True),
        (ExceptionGroup("connect", [OSError("unreachable")]), True),
        (ExceptionGroup("connect", [OverflowError("bad port")]), False),  # the URL's fault
        (503, True),
        (429, True),
        (408, True),
        (404, False),
        (403, False),
    ],
)
async def test_a_failure_for_now_is_told_from_a_document_gone(
    failure: BaseException | int, for_now: bool
) -> None:
    """The network or the server failing (`UnreachableDocument`) says nothing about the
    document, so a sync keeps its indexed copy; a 404 or a bad URL is the document's answer."""

    def answer(request: httpx.Request) -> httpx.Response:
        if isinstance(failure, int):
            return httpx.Response(failure, text="no")
        raise failure

    url = "http://docs.example.com/a"
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer), timeout=TIMEOUT) as http:
        with pytest.raises(UnreadableDocument) as caught:
            await fetch_url(SourceItem(url, url, url, "A"), 1000, http)
    assert isinstance(caught.value, UnreachableDocument) is for_now


@pytest.mark.parametrize(
    ("target", "refused"),
    [
        ("http://127.0.0.1/", True),
        ("http://2130706433/", True),  # 127.0.0.1 to the resolver, as are the next three
        ("http://0x7f.1/", True),
        ("http://127.1/", True),
        ("http://017700000001/", True),
        ("http://[::ffff:10.0.0.5]/", True),  # IPv4-mapped: 10.0.0.5 over IPv6
        ("http://[::ffff:169.254.169.254]/", True),
        ("http://169.254.43518/", True),
        ("https://docs.example.com/next", False),
        ("http://8.8.8.8/", False),
        ("http://1e100.net/", False),  # a name, not an address
    ],
)
def test_a_redirect_from_a_public_host_reaches_no_internal_address_however_spelled(
    target: str, refused: bool
) -> None:
    why = _redirect_refused(FetchStart("docs.example.com"), httpx.URL(target))
    assert (why is not None) is refused, why


@pytest.mark.parametrize(
    ("start", "target", "refused"),
    [
        # The guard found the start's name internal: an internal target is fine, metadata not.
        (FetchStart("wiki.corp", internal=True), "http://10.0.0.5/page", False),
        (FetchStart("wiki.corp", internal=True), "http://169.254.169.254/", True),
        # ... or public: no internal target.
        (FetchStart("docs.example.com", internal=False), "http://10.0.0.5/", True),
        # Not judged by the guard (behind a proxy): the start's own spelling decides.
        (FetchStart("10.0.0.1"), "http://10.0.0.5/page", False),
        (FetchStart("localhost"), "http://127.0.0.1:8080/", False),
        (FetchStart("wiki.corp"), "http://10.0.0.5/page", True),
    ],
)
def test_the_start_is_judged_as_the_guard_found_it(
    start: FetchStart, target: str, refused: bool
) -> None:
    why = _redirect_refused(start, httpx.URL(target))
    assert (why is not None) is refused, why
