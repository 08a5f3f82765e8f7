"""A local stand-in for llama.cpp's `llama-server` with a small model behind it.

It behaves as the real one did when recorded (`tests/data/recordings/`): the OpenAI-compatible
chat-completions route, replies streamed as server-sent events one token at a time (or one JSON
completion when `stream` is off), usage in the last chunk, `max_tokens` honoured with
`finish_reason: length`; a `tool_choice` object accepted with HTTP 200 and ignored (the real
server logs "type must be string, but is object"), and no tool call ever, whatever was asked,
because the model behind it never writes one.

What the model writes is a function of the request: `Recorded` replays the recorded replies by
question; `weak_model` writes, for any question, what the recorded model did across its
answers (copied sentences without markers, markers alone, entities copied from the escaped
passages, a confident claim no source makes, invented code, a loop of repeated lines).

Run it as a process for `bot eval answers --base-url`:
`python -m tests.fakes.llama_server --port 8091` (the weak model) or `--recorded` (replays).
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

RECORDING = (
    Path(__file__).parents[1] / "data" / "recordings" / "llama-server-qwen2.5-coder-0.5b.jsonl"
)
_TOKEN = re.compile(r"\s*\S+|\s+")
_SOURCE = re.compile(r'<source id="(\d+)"[^>]*>\n(.*?)\n</source>', re.DOTALL)
_SENTENCE = re.compile(r"[^.!?\n]{20,}[.!?]")


@dataclass(frozen=True)
class Request:
    question: str
    system: str
    tools: bool
    tool_choice: Any
    max_tokens: int

    def sources(self) -> dict[int, str]:
        """The passages as the model sees them in the prompt: HTML-escaped."""
        return {int(n): text for n, text in _SOURCE.findall(self.system)}


Model = Callable[[Request], str]


class LlamaServer:
    def __init__(self, model: Model, *, token_delay_s: float = 0.0, port: int = 0) -> None:
        self.model = model
        self.token_delay_s = token_delay_s
        self.requests: list[dict[str, Any]] = []
        self.log: list[str] = []  # what the real server logs about the requests
        self.tokens_sent: list[int] = []  # per request, until it ended or the client left
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # the streamed body ends when the connection closes

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                outer.handle(self, body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def start(self) -> LlamaServer:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def handle(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            self.log.append("type must be string, but is object")
        messages = body["messages"]
        request = Request(
            question=next(m["content"] for m in reversed(messages) if m["role"] == "user"),
            system=next((m["content"] for m in messages if m["role"] == "system"), ""),
            tools=bool(body.get("tools")),
            tool_choice=choice,
            max_tokens=int(body.get("max_tokens") or 4096),
        )
        tokens = _TOKEN.findall(self.model(request))
        finish = "length" if len(tokens) > request.max_tokens else "stop"
        tokens = tokens[: request.max_tokens]
        usage = {"prompt_tokens": len(_TOKEN.findall(str(messages))), "completion_tokens": 0}
        if not body.get("stream"):
            usage["completion_tokens"] = len(tokens)
            self.tokens_sent.append(len(tokens))
            message = {"role": "assistant", "content": "".join(tokens)}
            payload = {"choices": [{"index": 0, "finish_reason": finish, "message": message}]}
            _send(handler, "application/json", json.dumps({**payload, "usage": usage}).encode())
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()
        sent = 0
        try:
            for token in tokens:
                _event(handler, {"choices": [{"index": 0, "delta": {"content": token}}]})
                sent += 1
                time.sleep(self.token_delay_s)
            usage["completion_tokens"] = sent
            last = {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
            _event(handler, {**last, "usage": usage})
            handler.wfile.write(b"data: [DONE]\n\n")
            handler.wfile.flush()
        except OSError:  # the client closed the stream: the server stops generating
            pass
        self.tokens_sent.append(sent)


def _send(handler: BaseHTTPRequestHandler, media: str, data: bytes) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", media)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def _event(handler: BaseHTTPRequestHandler, chunk: dict[str, Any]) -> None:
    handler.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
    handler.wfile.flush()


class Recorded:
    """The recorded replies, by question: the reply to a request offering tools, and the one
    to the plain (search-then-answer) request."""

    def __init__(self, path: Path = RECORDING) -> None:
        self.rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        self._by = {(r["question"], r["tools"]): r["content"] for r in self.rows}

    def reply(self, question: str, *, tools: bool) -> str:
        return str(self._by[(question, tools)])

    def questions(self) -> list[str]:
        return list(dict.fromkeys(r["question"] for r in self.rows))

    def __call__(self, request: Request) -> str:
        return self.reply(request.question, tools=request.tools)


# -- the weak model: what the recorded one did, for any question ------------------------------

# Shares of each behaviour in the recorded search-then-answer replies (25 of them), rounded.
BEHAVIOURS = (
    ("copied", 8),  # sentences of a passage, as escaped in the prompt, without markers
    ("markers_only", 4),  # "[1] [2]"
    ("unsupported", 6),  # a confident answer no source makes
    ("invented", 3),  # steps and code of its own
    ("wrong_marker", 2),  # a passage's sentence marked with another passage's number
    ("repetition", 2),  # the same lines until the token limit
)
_TOOL_PROSE = (
    "To answer this, follow these steps:\n\n1. **Understand the question**: read it carefully.\n"
    "2. **Search**: look for the relevant documents.\n\n```python\ndef search(query):\n"
    "    return {'name': 'search_knowledge_base', 'arguments': {'query': query}}\n```\n"
)


def _pick(question: str, salt: str, count: int) -> int:
    digest = hashlib.sha256(f"{salt}:{question}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % count


def behaviour(question: str) -> str:
    weights = [(name, weight) for name, weight in BEHAVIOURS]
    point = _pick(question, "behaviour", sum(w for _, w in weights))
    for name, weight in weights:
        if point < weight:
            return name
        point -= weight
    raise AssertionError("unreachable")


def _sentences(passage: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.findall(passage)] or [passage.strip()[:200]]


def weak_model(request: Request) -> str:
    """A reply like the recorded model's to this request (deterministic per question)."""
    if request.tools:
        return _TOOL_PROSE * 8  # prose to a forced tool call, long until max_tokens
    sources = request.sources()
    if not sources:
        return "I'm sorry, I couldn't find that."
    kind = behaviour(request.question)
    # The recorded model mostly copied from the first passages it was given.
    number = sorted(sources)[_pick(request.question, "source", min(3, len(sources)))]
    passage = _sentences(sources[number])
    topic = request.question.rstrip("?").split(" ", 3)[-1]
    if kind == "copied":
        return f"To answer your question about {topic}:\n\n" + " ".join(passage[:2])
    if kind == "markers_only":
        return " ".join(f"[{n}]" for n in sorted(sources)[:2])
    if kind == "unsupported":
        return f"Yes, {topic} is supported by the quantum flux capacitor since version 7."
    if kind == "invented":
        return (
            f"To do {topic}, you can follow these steps:\n\n1. **Install**: run pip install "
            "magic-helper.\n2. **Configure**: set MAGIC_MODE=turbo.\n\n```python\n"
            "import magic_helper\nmagic_helper.solve(everything=True)\n```"
        )
    if kind == "wrong_marker":
        other = next((n for n in sorted(sources) if n != number), number)
        return f"{passage[0]} [{other}]"
    lines = "\n".join(passage[:3])
    return (lines + "\n") * 60


# Words a plausible liar turns round, each way: opposites of the kind the docs hold.
ALTERATIONS = (
    ("enable", "disable"),
    ("before", "after"),
    ("increase", "decrease"),
    ("more", "less"),
    ("higher", "lower"),
    ("larger", "smaller"),
    ("maximum", "minimum"),
    ("first", "last"),
    ("required", "optional"),
    ("input", "output"),
    ("faster", "slower"),
    ("longer", "shorter"),
    ("better", "worse"),
    ("always", "rarely"),
    ("all", "some"),
    ("most", "least"),
    ("user", "assistant"),
)
_SWAPS = {a: b for a, b in ALTERATIONS} | {b: a for a, b in ALTERATIONS}
_SWAPPABLE = re.compile(rf"\b({'|'.join(sorted(_SWAPS, key=len, reverse=True))})(d|s)?\b", re.I)
_LIE_WORDS = 6  # a sentence shorter than this is too little to pass for an answer


class AlteringModel:
    """A model that answers by copying one sentence of the passages it was given, citing it,
    with one word swapped for its opposite (`ALTERATIONS`): plausible, cited and wrong, the
    claim a word-overlap check finds hardest. `told` keeps, per question, the altered sentence
    and the pair it turned round. With `alter` off it copies the same sentence as it stands:
    the faithful answer, which the check must keep."""

    def __init__(self, *, alter: bool = True) -> None:
        self.alter = alter
        self.told: dict[str, tuple[str, tuple[str, str]]] = {}

    def __call__(self, request: Request) -> str:
        if request.tools:
            return "I will search the documentation for this."
        sources = request.sources()
        for number in sorted(sources)[:3]:
            for sentence in _sentences(html.unescape(sources[number])):
                found = _SWAPPABLE.search(sentence)
                if found and len(sentence.split()) >= _LIE_WORDS:
                    said = found.group(1).lower()
                    swapped = _SWAPS[said] if self.alter else found.group(1)
                    lie = sentence[: found.start(1)] + swapped + sentence[found.end(1) :]
                    pair = next(p for p in ALTERATIONS if said in p)
                    self.told[request.question] = (lie, pair)
                    return f"{lie} [{number}]"
        return "The sources do not answer this."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=8091)
    parser.add_argument("--recorded", action="store_true", help="replay the recorded replies")
    parser.add_argument("--token-delay-s", type=float, default=0.0)
    args = parser.parse_args()
    model: Model = Recorded() if args.recorded else weak_model
    server = LlamaServer(model, token_delay_s=args.token_delay_s, port=args.port)
    print(f"serving {server.url}", flush=True)
    server.server.serve_forever()


if __name__ == "__main__":
    main()
