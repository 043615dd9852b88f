"""The stand-in vLLM's HTTP server: vLLM 0.11's OpenAI-compatible routes over its engine.

GET /health and /ping (200, empty; POST /ping too), GET /version, GET /metrics (Prometheus text, or
OpenMetrics when the Accept header asks: vllm_exposition), GET /v1/models, GET /v1/models/{id},
POST /v1/completions and /v1/chat/completions (whole, or with `stream: true` as server-sent events
ending in `data: [DONE]`), POST /tokenize. Bodies and checks: vllm_openai.

vLLM's own router has no GET /v1/models/{id}; it is served (the card, or a 404 in the error shape)
because the official openai client's models.retrieve() asks for it. Not modelled: /detokenize,
/v1/embeddings, /v1/responses, /pooling, /score, LoRA and sleep-mode routes (404 here).
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from gpufleet_sim.tools import vllm_exposition, vllm_openai
from gpufleet_sim.tools.vllm_engine import Engine
from gpufleet_sim.tools.vllm_openai import ApiError, Job

VERSION = "0.11.0"
MAX_BODY = 4 * 1024 * 1024
GET_ROUTES = ("/health", "/ping", "/version", "/metrics", "/v1/models")
POST_ROUTES = ("/ping", "/v1/completions", "/v1/chat/completions", "/tokenize")
MODELS_PREFIX = "/v1/models/"


class Server(ThreadingHTTPServer):
    daemon_threads = True
    # vLLM's uvicorn listens with a backlog of 2048; socketserver's default of 5 refused connections
    # when a client opened 32 at once (issue 36)
    request_queue_size = 2048

    def __init__(self, address: tuple[str, int], engine: Engine) -> None:
        super().__init__(address, Handler)
        self.engine = engine
        self.started = int(time.time())


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server
    answered = False  # whether this request's status line went out

    def version_string(self) -> str:
        return "uvicorn"

    def log_message(self, format: str, *args: Any) -> None:
        # uvicorn's access log line
        print(
            f'INFO:     {self.client_address[0]}:{self.client_address[1]} - "{self.requestline}" {args[1]}',
            file=sys.stdout,
            flush=True,
        )

    def _send(self, code: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, code: int, payload: dict[str, Any]) -> None:
        self._send(code, json.dumps(payload).encode())

    def _unrouted(self, path: str, routes: tuple[str, ...]) -> None:
        known = path in GET_ROUTES + POST_ROUTES and path not in routes
        self._json(405 if known else 404, {"detail": "Method Not Allowed" if known else "Not Found"})

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        engine = self.server.engine
        if path in ("/health", "/ping"):
            self._send(200, b"")
        elif path == "/version":
            self._json(200, {"version": VERSION})
        elif path == "/metrics":
            body, content_type = vllm_exposition.render(engine, self.headers.get("accept"))
            self._send(200, body.encode(), content_type)
        elif path == "/v1/models":
            self._json(200, {"object": "list", "data": [self._card()]})
        elif path.startswith(MODELS_PREFIX) and len(path) > len(MODELS_PREFIX):
            self._model(unquote(path[len(MODELS_PREFIX) :]))
        else:
            self._unrouted(path, GET_ROUTES)

    def send_response(self, code: int, message: str | None = None) -> None:
        self.answered = True
        super().send_response(code, message)

    def do_POST(self) -> None:
        self.answered = False
        try:
            self._post()
        except Exception:
            # uvicorn logs an unhandled error and answers 500, where http.server would drop the
            # connection (a chat without max_tokens once did)
            traceback.print_exc()
            if not self.answered:
                self._send(500, b"Internal Server Error", "text/plain; charset=utf-8")
            self.close_connection = True

    def _post(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(min(length, MAX_BODY)) if length > 0 else b""
        path = self.path.split("?", 1)[0]
        if path not in POST_ROUTES:
            self._unrouted(path, POST_ROUTES)
            return
        if path == "/ping":
            self._send(200, b"")
            return
        try:
            request = json.loads(raw or b"{}")
        except ValueError:
            self._json(400, vllm_openai.error("Invalid JSON body", "BadRequestError", 400))
            return
        request = request if isinstance(request, dict) else {}
        config = self.server.engine.config
        try:
            if path == "/tokenize":
                self._json(200, vllm_openai.tokenize(request, config))
                return
            job = vllm_openai.parse(request, config, chat=path == "/v1/chat/completions")
        except ApiError as exc:
            self._json(exc.status, exc.body)
            return
        if job.stream:
            self._stream(job)
        else:
            for _ in self.server.engine.generate(job.prompts, job.steps, job.n, ends=job.engine_ends()):
                pass
            self._json(200, vllm_openai.response(job))

    def _card(self) -> dict[str, Any]:
        return vllm_openai.model_card(self.server.engine.config, self.server.started)

    def _model(self, name: str) -> None:
        if name == self.server.engine.config.served_name:
            self._json(200, self._card())
        else:
            message = f"The model `{name}` does not exist."
            self._json(404, vllm_openai.error(message, "NotFoundError", 404, "model"))

    # -- server-sent events, in HTTP/1.1 chunks as uvicorn sends them ---------------------------
    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _event(self, payload: dict[str, Any]) -> None:
        self._chunk(b"data: " + json.dumps(payload).encode() + b"\n\n")

    def _stream(self, job: Job) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        steps = self.server.engine.generate(
            job.prompts, job.steps, job.n, stream=True, ends=job.engine_ends()
        )
        try:
            if job.chat:
                for choice in range(job.choices):
                    self._event(vllm_openai.role_chunk(job, choice))
            sent = 0
            for done in steps:
                for choice, end in enumerate(job.ends):
                    # a choice that has ended sends nothing more
                    found = (
                        vllm_openai.chunk(job, choice, sent, min(done, end.tokens))
                        if sent < end.tokens
                        else None
                    )
                    if found is not None:
                        self._event(found)
                sent = done
            if job.include_usage:
                self._event(vllm_openai.usage_chunk(job, sent))
            self._chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            # the client went away: the engine counts the request as aborted
            self.close_connection = True
        finally:
            steps.close()
