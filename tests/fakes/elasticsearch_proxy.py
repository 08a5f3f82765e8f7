"""A local stand-in in front of the Elasticsearch emulator that plays what the emulator can't:
a licence, the 403 a basic licence gives the `rrf` retriever, a server of another major version,
wrong credentials, bulk items refused (429 once, or 400 for good), and bulk or other requests
answered 503, as by a cluster whose primary shard is not active.

Everything not scripted is forwarded to the upstream server unchanged, so the real client talks
to a real REST API with only the scripted differences.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from aiohttp import ClientSession, web

_HEADERS = {"X-Elastic-Product": "Elasticsearch"}

# Recorded from Elasticsearch 8.x on a basic licence, searching with an `rrf` retriever.
RRF_REFUSED = {
    "error": {
        "root_cause": [
            {
                "type": "security_exception",
                "reason": "current license is non-compliant for [Reciprocal Rank Fusion (RRF)]",
                "license.expired.feature": "Reciprocal Rank Fusion (RRF)",
            }
        ],
        "type": "security_exception",
        "reason": "current license is non-compliant for [Reciprocal Rank Fusion (RRF)]",
        "license.expired.feature": "Reciprocal Rank Fusion (RRF)",
    },
    "status": 403,
}
UNAUTHORIZED = {
    "error": {
        "root_cause": [
            {
                "type": "security_exception",
                "reason": "unable to authenticate user [elastic] for REST request [/]",
            }
        ],
        "type": "security_exception",
        "reason": "unable to authenticate user [elastic] for REST request [/]",
    },
    "status": 401,
}

# What a cluster whose primary shard is not active (yet) answers a write.
UNAVAILABLE = {
    "error": {
        "root_cause": [
            {"type": "unavailable_shards_exception", "reason": "primary shard is not active"}
        ],
        "type": "unavailable_shards_exception",
        "reason": "primary shard is not active",
    },
    "status": 503,
}


def licence_body(kind: str) -> dict[str, Any]:
    return {
        "license": {
            "status": "active",
            "uid": "00000000-0000-0000-0000-000000000000",
            "type": kind,
            "issue_date_in_millis": 1_700_000_000_000,
            "max_nodes": 1000,
            "issued_to": "docker-cluster",
            "issuer": "elasticsearch",
            "start_date_in_millis": -1,
        }
    }


@dataclass
class ProxyScript:
    licence: str | None = None  # answer GET /_license with this licence type
    refuse_rrf: bool = False  # answer searches with a retriever with the recorded 403
    server_version: str | None = None  # claim this version in GET /
    unauthorized: bool = False  # answer everything with 401
    throttle_once: set[str] = field(default_factory=set)  # bulk ids refused with 429, once
    reject: set[str] = field(default_factory=set)  # bulk ids refused with 400, always
    seen: list[str] = field(default_factory=list)  # "METHOD path" of every request
    delay_once: dict[str, float] = field(default_factory=dict)  # "METHOD path" -> seconds
    fail_bulks_after: int | None = None  # every bulk request after this many answers 503
    unavailable: set[str] = field(default_factory=set)  # paths ending so answer 503
    # paths ending so answer (status, body): a JSON body, or text ("" for none)
    refuse: dict[str, tuple[int, dict[str, Any] | str]] = field(default_factory=dict)
    bulks: int = 0  # bulk requests seen


class ElasticsearchProxy:
    def __init__(self, upstream: str, script: ProxyScript) -> None:
        self.upstream = upstream.rstrip("/")
        self.script = script
        self.app = web.Application(client_max_size=1 << 30)
        self.app.router.add_route("*", "/{tail:.*}", self._handle)
        self._session: ClientSession | None = None

    async def _forward(self, request: web.Request, body: bytes) -> tuple[int, bytes, str]:
        if self._session is None:
            self._session = ClientSession()
        headers = {
            k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")
        }
        async with self._session.request(
            request.method, f"{self.upstream}{request.path_qs}", data=body, headers=headers
        ) as response:
            return response.status, await response.read(), response.content_type

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        s = self.script
        key = f"{request.method} {request.path}"
        s.seen.append(key)
        if key in s.delay_once:  # this request, once, reaches the server late
            await asyncio.sleep(s.delay_once.pop(key))
        body = await request.read()
        if s.unauthorized:
            return web.json_response(UNAUTHORIZED, status=401, headers=_HEADERS)
        if request.path == "/_license" and s.licence is not None:
            return web.json_response(licence_body(s.licence), headers=_HEADERS)
        if s.refuse_rrf and request.path.endswith("/_search") and b'"retriever"' in body:
            return web.json_response(RRF_REFUSED, status=403, headers=_HEADERS)
        if request.path.endswith("/_bulk"):
            s.bulks += 1
            if s.fail_bulks_after is not None and s.bulks > s.fail_bulks_after:
                return web.json_response(UNAVAILABLE, status=503, headers=_HEADERS)
        if any(request.path.endswith(suffix) for suffix in s.unavailable):
            return web.json_response(UNAVAILABLE, status=503, headers=_HEADERS)
        for suffix, (status, answer) in s.refuse.items():
            if request.path.endswith(suffix):
                if isinstance(answer, str):
                    return web.Response(status=status, text=answer, headers=_HEADERS)
                return web.json_response(answer, status=status, headers=_HEADERS)
        status, payload, content_type = await self._forward(request, body)
        if request.path == "/" and s.server_version is not None and status == 200:
            info = json.loads(payload)
            info["version"]["number"] = s.server_version
            payload = json.dumps(info).encode()
        elif request.path.endswith("/_bulk") and status == 200:
            payload = self._fault_bulk(payload)
        return web.Response(
            status=status, body=payload, content_type=content_type, headers=_HEADERS
        )

    def _fault_bulk(self, payload: bytes) -> bytes:
        """Mark scripted items of a bulk response as refused, as a busy or strict cluster does."""
        result = json.loads(payload)
        for item in result.get("items", []):
            op = next(iter(item.values()))
            doc_id = op.get("_id")
            if doc_id in self.script.throttle_once:
                self.script.throttle_once.discard(doc_id)
                op.update(
                    status=429,
                    error={"type": "es_rejected_execution_exception", "reason": "queue full"},
                )
            elif doc_id in self.script.reject:
                op.update(
                    status=400,
                    error={"type": "document_parsing_exception", "reason": "scripted rejection"},
                )
            else:
                continue
            result["errors"] = True
        return json.dumps(result).encode()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
