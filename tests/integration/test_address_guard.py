"""Where the document fetcher may connect, judged on the addresses a name resolves to.

The real httpx client and connection pool, with `AddressGuard` as their network backend,
fetch from a local site. Two stand-ins take the internet's place: a resolver (DNS) that maps
test names to addresses, and a route that carries a connection meant for a public address to
the local site. Both record what they were asked, so a test sees which addresses the guard
looked up and which it connected to.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path

import httpcore
import httpx
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from core.errors import UnreachableDocument, UnreadableDocument
from core.ingest.address_guard import AddressGuard, GuardedTransport, SocketOption
from core.ingest.sources import SourceItem, fetch_url
from tests.fakes.dns import Resolver

PUBLIC = "93.184.215.14"  # a globally routable address, reached here through `Route`
PAGE = b"<html><head><title>Guide</title></head><body><p>Deploying</p></body></html>"
MAX_BYTES = 100_000


class Route(httpcore.AsyncNetworkBackend):
    """The network, standing in: a connection to `PUBLIC` reaches the local site; every other
    address is connected to as it is. `connected` lists the addresses asked for."""

    def __init__(self, site_port: int) -> None:
        self._inner = httpcore.AnyIOBackend()
        self._site_port = site_port
        self.connected: list[str] = []

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self.connected.append(host)
        if host == PUBLIC:
            host, port = "127.0.0.1", self._site_port
        return await self._inner.connect_tcp(host, port, timeout, local_address, socket_options)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


async def _page(request: web.Request) -> web.StreamResponse:
    # A new connection per request, so each fetch is judged again (no kept-alive socket).
    headers = {"Connection": "close"}
    target = request.query.get("to")
    if target is not None:
        raise web.HTTPFound(target, headers=headers)
    return web.Response(body=PAGE, content_type="text/html", headers=headers)


def _site() -> web.Application:
    app = web.Application()
    app.router.add_get("/{tail:.*}", _page)
    return app


@pytest.fixture
async def site() -> AsyncIterator[int]:
    server = TestServer(_site(), host="127.0.0.1")
    await server.start_server()
    try:
        assert server.port is not None
        yield server.port
    finally:
        await server.close()


@dataclass
class Net:
    resolver: Resolver
    route: Route
    client: httpx.AsyncClient

    async def fetch(self, url: str) -> bytes:
        return (await fetch_url(SourceItem(url, url, url, "page"), MAX_BYTES, self.client)).data


@pytest.fixture
async def net(site: int) -> AsyncIterator[Net]:
    resolver = Resolver(
        {
            "docs.public.test": [PUBLIC],
            "metadata.test": ["169.254.169.254"],
            "metadata-v6.test": ["fd00:ec2::254"],
            "metadata-mapped.test": ["::ffff:169.254.169.254"],
            "wiki.internal.test": ["127.0.0.1"],
            "split.test": [PUBLIC, "10.0.0.7"],
        }
    )
    route = Route(site)
    transport = GuardedTransport(AddressGuard(route, resolver))
    async with httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(5)) as client:
        yield Net(resolver, route, client)


@pytest.mark.parametrize(
    ("name", "address"),
    [
        ("metadata.test", "169.254.169.254"),
        ("metadata-v6.test", "fd00:ec2::254"),
        ("metadata-mapped.test", "169.254.169.254"),
        ("169.254.169.254", "169.254.169.254"),
        ("2852039166", "169.254.169.254"),  # inet_aton's forms are addresses to a resolver
        ("0xa9fea9fe", "169.254.169.254"),
        ("[fe80::1]", "fe80::1"),
        ("[fd00:ec2::254]", "fd00:ec2::254"),
    ],
)
async def test_a_metadata_address_is_never_connected_to_however_it_is_named(
    net: Net, name: str, address: str
) -> None:
    with pytest.raises(UnreadableDocument) as refused:
        await net.fetch(f"http://{name}/latest/")
    assert f"resolves to {address}, a metadata address" in str(refused.value)
    assert net.route.connected == []


@pytest.mark.parametrize("name", ["metadata.test", "metadata-v6.test", "metadata-mapped.test"])
async def test_a_redirect_to_a_name_of_a_metadata_address_is_refused(
    net: Net, site: int, name: str
) -> None:
    """From an internal site, which may otherwise reach internal hosts; the redirect's own
    check sees only a name."""
    with pytest.raises(UnreadableDocument, match="a metadata address"):
        await net.fetch(f"http://127.0.0.1:{site}/?to=http://{name}/latest/")
    assert net.route.connected == ["127.0.0.1"]  # the redirecting site, and nothing else


async def test_a_public_start_never_reaches_an_internal_address_by_name(
    net: Net, site: int
) -> None:
    assert await net.fetch(f"http://docs.public.test:{site}/guide") == PAGE
    with pytest.raises(UnreadableDocument) as refused:
        await net.fetch(f"http://docs.public.test:{site}/?to=http://wiki.internal.test:{site}/")
    assert str(refused.value).endswith(
        "wiki.internal.test resolves to 127.0.0.1, an internal address, and this fetch started"
        " at a public host (docs.public.test)"
    )
    assert net.route.connected == [PUBLIC, PUBLIC]  # the two pages of the public site only


async def test_the_start_host_rebound_to_an_internal_address_is_refused(
    net: Net, site: int
) -> None:
    """DNS rebinding: the site's name answers a public address for the first page, then
    127.0.0.1. The second connection is judged on the new answer, against the first."""
    url = f"http://docs.public.test:{site}/guide"
    assert await net.fetch(url) == PAGE
    net.resolver.names["docs.public.test"] = ["127.0.0.1"]
    with pytest.raises(UnreadableDocument) as refused:
        await net.fetch(url)
    assert "docs.public.test resolves to 127.0.0.1, an internal address" in str(refused.value)
    assert net.route.connected == [PUBLIC]
    assert net.resolver.asked == ["docs.public.test", "docs.public.test"]


async def test_a_name_with_a_public_and_an_internal_address_is_judged_public(
    net: Net, site: int
) -> None:
    with pytest.raises(UnreadableDocument, match=r"split\.test resolves to 10\.0\.0\.7"):
        await net.fetch(f"http://split.test:{site}/guide")
    assert net.route.connected == []


async def test_an_internal_start_reaches_internal_names_at_the_address_judged(
    net: Net, site: int
) -> None:
    redirect = f"http://127.0.0.1:{site}/?to=http://wiki.internal.test:{site}/page"
    assert await net.fetch(redirect) == PAGE
    assert await net.fetch(f"http://wiki.internal.test:{site}/page") == PAGE
    # Connected to the address looked up, never to the name (a second lookup could differ).
    assert net.route.connected == ["127.0.0.1", "127.0.0.1", "127.0.0.1"]
    assert net.resolver.asked == ["127.0.0.1", "wiki.internal.test", "wiki.internal.test"]


async def test_a_site_reached_by_an_internal_name_may_redirect_to_an_internal_address(
    net: Net, site: int
) -> None:
    """An intranet wiki known by name that sends readers on to an address (a load balancer's
    redirect): the guard found its start internal, so the redirect's target is too."""
    url = f"http://wiki.internal.test:{site}/?to=http://127.0.0.1:{site}/page"
    assert await net.fetch(url) == PAGE
    assert net.route.connected == ["127.0.0.1", "127.0.0.1"]


async def test_a_site_reached_by_a_public_name_may_not_redirect_to_an_internal_address(
    net: Net, site: int
) -> None:
    with pytest.raises(UnreadableDocument) as refused:
        await net.fetch(f"http://docs.public.test:{site}/?to=http://127.0.0.1:{site}/page")
    assert (
        str(refused.value) == "redirect from a public host to an internal one (127.0.0.1) refused"
    )
    assert net.route.connected == [PUBLIC]


async def test_a_request_outside_a_fetch_is_refused_only_metadata(net: Net, site: int) -> None:
    """An API client's request (Confluence's) has no start host: its base URL is the
    operator's, often internal."""
    response = await net.client.get(f"http://wiki.internal.test:{site}/api")
    assert response.content == PAGE
    with pytest.raises(httpx.ConnectError, match="metadata address"):
        await net.client.get("http://metadata.test/latest/")


async def test_a_name_that_does_not_resolve_is_unreachable_for_now(net: Net) -> None:
    """Not the guard's verdict: DNS may answer tomorrow, so an indexed copy is kept."""
    with pytest.raises(UnreachableDocument, match=r"can't look up nowhere\.test: Name or service"):
        await net.fetch("http://nowhere.test/guide")


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl makes the test certificate")
async def test_tls_is_verified_against_the_name_not_the_address_connected_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard connects to an address, yet the certificate is checked for the URL's name:
    this one names `wiki.internal.test` and no address, so a check against 127.0.0.1 fails."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    name = ["-subj", "/CN=wiki.internal.test", "-addext", "subjectAltName=DNS:wiki.internal.test"]
    files = ["-keyout", str(key), "-out", str(cert)]
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", *name, *files],
        check=True,
        capture_output=True,
    )
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    server = TestServer(_site(), host="127.0.0.1")
    await server.start_server(ssl=served)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # httpx's own trust setting: this CA only
    resolver = Resolver({"wiki.internal.test": ["127.0.0.1"]})
    transport = GuardedTransport(AddressGuard(resolve=resolver))
    try:
        async with httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(5)) as client:
            net = Net(resolver, Route(0), client)
            assert await net.fetch(f"https://wiki.internal.test:{server.port}/page") == PAGE
            with pytest.raises(UnreachableDocument, match="CERTIFICATE_VERIFY_FAILED"):
                await net.fetch(f"https://127.0.0.1:{server.port}/page")
    finally:
        await server.close()
