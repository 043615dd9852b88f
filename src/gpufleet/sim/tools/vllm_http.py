"""The stand-in vLLM's OpenAI-compatible HTTP API and its Prometheus /metrics.

Routes as vLLM's API server has them: GET /health (200, empty), GET /version, GET /v1/models,
POST /v1/completions, GET /metrics. Metric names, HELP texts and number formatting follow the
real exposition in tests/fixtures/real/vllm-metrics (vLLM V1, prometheus_client), plus V0's
vllm:gpu_prefix_cache_hit_rate gauge that older dashboards and checks still read.
"""

from __future__ import annotations

import json
import secrets
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from gpufleet.sim.tools.vllm_engine import Engine, tokens

VERSION = "0.11.0"
MAX_BODY = 4 * 1024 * 1024


def go_float(value: float) -> str:
    """Go-style floats as the real exposition prints them: 1.0931263819e+10, 0.0, 1.7869106011177013e+09."""
    value = float(value)
    text = repr(value)
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return text


def _labels(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def _family(
    lines: list[str], name: str, kind: str, help_text: str, samples: list[tuple[dict[str, str], float]]
) -> None:
    lines.append(f"# HELP {name} {help_text}")
    lines.append(f"# TYPE {name} {kind}")
    lines.extend(f"{name}{_labels(labels)} {go_float(value)}" for labels, value in samples)


def _counter(
    lines: list[str], name: str, help_text: str, samples: list[tuple[dict[str, str], float]], created: float
) -> None:
    _family(lines, f"{name}_total", "counter", help_text, samples)
    _family(lines, f"{name}_created", "gauge", help_text, [(labels, created) for labels, _ in samples])


# (name, kind, HELP, snapshot key) in the order vLLM V1 registers them; counters get _created too.
_SERIES = (
    ("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", "running"),
    ("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", "waiting"),
    ("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", "kv_usage"),
    (
        "vllm:prefix_cache_queries",
        "counter",
        "Prefix cache queries, in terms of number of queried tokens.",
        "queries",
    ),
    ("vllm:prefix_cache_hits", "counter", "Prefix cache hits, in terms of number of cached tokens.", "hits"),
    ("vllm:gpu_prefix_cache_hit_rate", "gauge", "GPU prefix cache block hit rate.", "hit_rate"),
    ("vllm:num_preemptions", "counter", "Cumulative number of preemption from the engine.", "preemptions"),
    ("vllm:prompt_tokens", "counter", "Number of prefill tokens processed.", "prompt_tokens"),
    ("vllm:generation_tokens", "counter", "Number of generation tokens processed.", "generation_tokens"),
)


def metrics(engine: Engine) -> str:
    snap = engine.snapshot()
    snap["hit_rate"] = snap["hits"] / snap["queries"] if snap["queries"] else 0.0
    config = engine.config
    base = {"engine": "0", "model_name": config.served_name}
    created = float(snap["created"])
    lines: list[str] = []
    for name, kind, help_text, key in _SERIES:
        if kind == "counter":
            _counter(lines, name, help_text, [(base, snap[key])], created)
        else:
            _family(lines, name, kind, help_text, [(base, snap[key])])
    success = [
        ({"engine": "0", "finished_reason": reason, "model_name": config.served_name}, count)
        for reason, count in sorted(snap["success"].items())
    ]
    _counter(lines, "vllm:request_success", "Count of successfully processed requests.", success, created)
    info = {
        "block_size": "16",
        "cache_dtype": "auto",
        "enable_prefix_caching": str(config.prefix_caching),
        "engine": "0",
        "gpu_memory_utilization": str(config.gpu_memory_utilization),
        "kv_cache_size_tokens": str(engine.kv_capacity_tokens),
        "num_gpu_blocks": str(engine.kv_capacity_tokens // 16),
        "swap_space": str(config.swap_space),
    }
    _family(
        lines, "vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig", [(info, 1.0)]
    )
    return "\n".join(lines) + "\n"


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], engine: Engine) -> None:
        super().__init__(address, Handler)
        self.engine = engine
        self.started = int(time.time())


def _error(message: str, kind: str, code: int, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

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

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        engine = self.server.engine
        if path == "/health":
            self._send(200, b"")
        elif path == "/version":
            self._json(200, {"version": VERSION})
        elif path == "/metrics":
            self._send(200, metrics(engine).encode(), "text/plain; version=0.0.4; charset=utf-8")
        elif path == "/v1/models":
            self._json(200, self._models())
        elif path == "/v1/completions":
            self._json(405, {"detail": "Method Not Allowed"})
        else:
            self._json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(min(length, MAX_BODY)) if length > 0 else b""
        path = self.path.split("?", 1)[0]
        if path != "/v1/completions":
            known = path in ("/health", "/version", "/metrics", "/v1/models")
            self._json(405 if known else 404, {"detail": "Method Not Allowed" if known else "Not Found"})
            return
        try:
            request = json.loads(raw or b"{}")
        except ValueError:
            self._json(400, _error("Invalid JSON body", "BadRequestError", 400))
            return
        self._completions(request if isinstance(request, dict) else {})

    def _models(self) -> dict[str, Any]:
        config = self.server.engine.config
        card = {
            "id": config.served_name,
            "object": "model",
            "created": self.server.started,
            "owned_by": "vllm",
            "root": config.model,
            "parent": None,
            "max_model_len": config.max_model_len,
            "permission": [
                {
                    "id": f"modelperm-{secrets.token_hex(16)}",
                    "object": "model_permission",
                    "created": self.server.started,
                    "allow_create_engine": False,
                    "allow_sampling": True,
                    "allow_logprobs": True,
                    "allow_search_indices": False,
                    "allow_view": True,
                    "allow_fine_tuning": False,
                    "organization": "*",
                    "group": None,
                    "is_blocking": False,
                }
            ],
        }
        return {"object": "list", "data": [card]}

    def _completions(self, request: dict[str, Any]) -> None:
        engine = self.server.engine
        config = engine.config
        model = request.get("model", config.served_name)
        if model != config.served_name:
            self._json(404, _error(f"The model `{model}` does not exist.", "NotFoundError", 404, "model"))
            return
        prompt = request.get("prompt")
        prompts = [prompt] if isinstance(prompt, str) else prompt
        if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) for p in prompts):
            self._json(
                400, _error("prompt must be a string or a list of strings", "BadRequestError", 400, "prompt")
            )
            return
        if request.get("stream"):
            self._json(
                400, _error("streaming is not supported by this server", "BadRequestError", 400, "stream")
            )
            return
        max_tokens = request.get("max_tokens", 16)
        if not isinstance(max_tokens, int) or max_tokens < 1:
            self._json(400, _error("max_tokens must be at least 1", "BadRequestError", 400, "max_tokens"))
            return
        longest = max(tokens(p) for p in prompts)
        if longest + max_tokens > config.max_model_len:
            message = (
                f"This model's maximum context length is {config.max_model_len} tokens. However, you "
                f"requested {longest + max_tokens} tokens ({longest} in the messages, {max_tokens} in the "
                "completion). Please reduce the length of the messages or completion."
            )
            self._json(400, _error(message, "BadRequestError", 400))
            return
        done = engine.complete(prompts, max_tokens)
        prompt_total = sum(c.prompt_tokens for c in done)
        completion_total = sum(c.completion_tokens for c in done)
        self._json(
            200,
            {
                "id": f"cmpl-{secrets.token_hex(16)}",
                "object": "text_completion",
                "created": int(time.time()),
                "model": config.served_name,
                "choices": [
                    {
                        "index": i,
                        "text": c.text,
                        "logprobs": None,
                        "finish_reason": "length",
                        "stop_reason": None,
                        "prompt_logprobs": None,
                    }
                    for i, c in enumerate(done)
                ],
                "usage": {
                    "prompt_tokens": prompt_total,
                    "total_tokens": prompt_total + completion_total,
                    "completion_tokens": completion_total,
                    "prompt_tokens_details": None,
                },
            },
        )
