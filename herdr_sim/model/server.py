"""The scripted model server: Anthropic Messages, OpenAI Responses and Chat Completions on 127.0.0.1, every request logged.

`python -m herdr_sim.model.server --log FILE [--brains FILE]` serves until interrupted and prints its base URL;
tests start `ModelServer` in-process instead. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from herdr_sim.model import wire
from herdr_sim.model.brains import Brain, BrainError, load_brains, task_of
from herdr_sim.model.conversation import Conversation, WireError, from_anthropic, from_chat, from_responses
import contextlib

MODEL = "orch-scripted"
MAX_BODY = 64 * 1024 * 1024
ROUTES = {"/v1/messages": "anthropic", "/v1/chat/completions": "chat", "/v1/responses": "responses",
          "/chat/completions": "chat", "/responses": "responses", "/messages": "anthropic"}
DECODERS = {"anthropic": from_anthropic, "chat": from_chat, "responses": from_responses}


class ModelServer:
    """A scripted model on an ephemeral 127.0.0.1 port; `with ModelServer(log) as model:` then `model.url`."""

    def __init__(self, log: Path, brain: Brain | None = None, *, think_s: float = 0.0) -> None:
        self.log = Path(log)
        self.brain = brain or Brain()
        # How long the model "thinks" before its first byte. A real model takes seconds; an instant one makes a whole
        # turn shorter than herdr's screen detection, which then never sees the agent working.
        self.think_s = think_s
        self._lock = threading.Lock()
        self._count = 0
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL (no path): agents add `/v1/...` themselves, or are told `<url>/v1`."""
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> ModelServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="scripted-model", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving and release the port."""
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def record(self, entry: dict[str, Any]) -> None:
        """Append one request (and what was answered) to the JSONL log."""
        with self._lock:
            self._count += 1
            entry = {"n": self._count, "time": round(time.time(), 3), **entry}
            with self.log.open("a", encoding="utf-8") as out:
                out.write(json.dumps(entry, ensure_ascii=False) + "\n")

    def requests(self) -> list[dict[str, Any]]:
        """Every logged request so far, in order."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines() if line.strip()]


def _handler(model: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # the JSONL log is the record; stderr stays quiet
            return

        def _send_json(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _send_stream(self, events: Iterator[bytes]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for event in events:
                self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0].rstrip("/")
            model.record({"method": "GET", "path": path})
            if path.endswith("/models"):
                self._send_json(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "type": "model",
                                                                  "owned_by": "orch", "display_name": MODEL}]})
            else:
                self._send_json(200, {})

        def do_HEAD(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            path = self.path.split("?", 1)[0].rstrip("/")
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self._send_json(413, {"error": {"type": "invalid_request_error", "message": "request too large"}})
                return
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                model.record({"method": "POST", "path": path, "error": "body is not JSON"})
                self._send_json(400, {"error": {"type": "invalid_request_error", "message": "body is not JSON"}})
                return
            if path.endswith("/count_tokens"):
                model.record({"method": "POST", "path": path, "protocol": "anthropic", "request": body})
                self._send_json(200, {"input_tokens": max(1, len(raw) // 4)})
                return
            protocol = ROUTES.get(path.removeprefix("/api") if path.startswith("/api/") else path)
            if protocol is None:
                model.record({"method": "POST", "path": path, "error": "unknown path", "request": body})
                self._send_json(404, {"error": {"type": "not_found_error", "message": f"no route {path}"}})
                return
            try:
                conv = DECODERS[protocol](body)
                reply = model.brain.respond(conv)
            except (WireError, AttributeError, TypeError, KeyError) as exc:
                model.record({"method": "POST", "path": path, "protocol": protocol, "error": str(exc), "request": body})
                self._send_json(400, {"error": {"type": "invalid_request_error", "message": str(exc)}})
                return
            model.record({"method": "POST", "path": path, "protocol": protocol, "task": task_of(conv),
                          "stream": conv.stream, "request": body,
                          "reply": {"text": reply.text, "calls": [{"name": c.name, "arguments": c.arguments} for c in reply.calls]}})
            if model.think_s and conv.tools:  # turns only: side requests (titles) stay instant
                time.sleep(model.think_s)
            self._answer(protocol, conv, reply)

        def _answer(self, protocol: str, conv: Conversation, reply: wire.Reply) -> None:
            ident, created = uuid.uuid4().hex[:24], int(time.time())
            model_name = conv.model or MODEL
            if protocol == "anthropic":
                if conv.stream:
                    self._send_stream(wire.anthropic_stream(reply, model_name, f"msg_{ident}"))
                else:
                    self._send_json(200, wire.anthropic_message(reply, model_name, f"msg_{ident}"))
            elif protocol == "chat":
                if conv.stream:
                    self._send_stream(wire.chat_stream(reply, model_name, f"chatcmpl-{ident}", created))
                else:
                    self._send_json(200, wire.chat_completion(reply, model_name, f"chatcmpl-{ident}", created))
            elif conv.stream:
                self._send_stream(wire.responses_stream(reply, model_name, f"resp_{ident}", created))
            else:
                self._send_json(200, wire.responses_object(reply, model_name, f"resp_{ident}", created))

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m herdr_sim.model.server", description=__doc__.splitlines()[0])
    parser.add_argument("--log", required=True, type=Path, help="JSONL file every request is appended to")
    parser.add_argument("--brains", type=Path, help="TOML: [task.<label>] brain = worker|question|blocked|false-claim|silent")
    parser.add_argument("--think", type=float, default=0.0, metavar="SECONDS", help="wait this long before each answer to an agent's turn")
    args = parser.parse_args(argv)
    try:
        brain = Brain(load_brains(args.brains))
    except BrainError as exc:
        print(f"herdr-sim model: {exc}", file=sys.stderr)
        return 2
    with ModelServer(args.log, brain, think_s=args.think) as server:
        print(server.url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
