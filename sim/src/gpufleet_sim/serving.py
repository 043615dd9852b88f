"""A serving load for tests and the demo: clients that keep requests in flight on vLLM instances.

``ServingLoad(urls)`` is a context manager: on entry it starts `concurrency` client threads per
instance, each sending ``POST /v1/completions`` (the model named by the instance's
``GET /v1/models``) one after the other, so the instance always has about that many requests
running; on exit it stops them and joins every thread. Stdlib only (urllib), like the simulator.

``instance_urls(node_dir)`` / ``fleet_instance_urls(fleet_root)`` find the instances a simulated
node runs: its active units whose ExecStart is ``vllm serve``, at the address the stand-in binds.
"""

from __future__ import annotations

import http.client
import json
import threading
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from gpufleet_sim import state as sim_state
from gpufleet_sim.tools import systemd_units
from gpufleet_sim.tools.vllm import WILDCARDS

REQUEST_TIMEOUT_S = 30.0
# Tokens per completion the load asks for (not the server's default for a request that names none,
# vllm_openai.DEFAULT_MAX_TOKENS). The load on the GPUs is the number of requests in flight, whatever
# their length, and each request costs the stand-in two writes of the node's state (load on, load off):
# 64 tokens (~0.66 s on healthy GPUs, as the gate's burn-in asks) keep `concurrency` in flight with a
# quarter of the requests that 16 took.
LOAD_MAX_TOKENS = 64
# After a failure a client waits this long before its next try (an instance still loading).
RETRY_S = 0.2
DEFAULT_PORT = 8000


class ServingLoad:
    """Keeps `concurrency` completions in flight against each base URL (``http://host:port``)."""

    def __init__(self, urls: list[str], concurrency: int = 4, max_tokens: int = LOAD_MAX_TOKENS) -> None:
        if concurrency < 1 or max_tokens < 1:
            raise ValueError("concurrency and max_tokens must be at least 1")
        self.urls = [url.rstrip("/") for url in urls]
        self.concurrency = concurrency
        self.max_tokens = max_tokens
        self.successes: dict[str, int] = dict.fromkeys(self.urls, 0)
        self.errors: dict[str, int] = dict.fromkeys(self.urls, 0)
        self.last_error: str | None = None
        self._models: dict[str, str] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def ok(self) -> int:
        with self._lock:
            return sum(self.successes.values())

    @property
    def failed(self) -> int:
        with self._lock:
            return sum(self.errors.values())

    def start(self) -> ServingLoad:
        if self._threads:
            raise RuntimeError("this load is already running")
        self._stop.clear()
        for url in self.urls:
            for n in range(self.concurrency):
                thread = threading.Thread(
                    target=self._client, args=(url, n), name=f"serving-load {url} #{n}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
        return self

    def stop(self) -> None:
        """Stops sending; each client finishes the request it has in flight, then every thread is joined."""
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._threads = []

    def __enter__(self) -> ServingLoad:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    # -- one client -------------------------------------------------------------------------------
    def _client(self, url: str, n: int) -> None:
        sent = 0
        while not self._stop.is_set():
            try:
                body = {
                    "model": self._model(url),
                    "prompt": f"client {n} request {sent}: say hello",
                    "max_tokens": self.max_tokens,
                }
                _call(f"{url}/v1/completions", body)
            except (OSError, http.client.HTTPException, ValueError, KeyError, IndexError) as err:
                self._count(url, self.errors, f"{url}: {err}")
                self._stop.wait(RETRY_S)
            else:
                self._count(url, self.successes)
            sent += 1

    def _count(self, url: str, counts: dict[str, int], error: str | None = None) -> None:
        with self._lock:
            counts[url] += 1
            if error is not None:
                self.last_error = error

    def _model(self, url: str) -> str:
        with self._lock:
            known = self._models.get(url)
        if known is None:
            known = str(_call(f"{url}/v1/models")["data"][0]["id"])
            with self._lock:
                self._models[url] = known
        return known


def _call(url: str, body: dict[str, Any] | None = None) -> Any:
    """GET (or POST a JSON body) and decode the JSON answer; HTTP errors raise (urllib's HTTPError)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method="POST" if body is not None else "GET")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
        return json.loads(response.read())


# -- where a simulated fleet serves -----------------------------------------------------------------
def _unit_dirs(node_dir: Path) -> tuple[Path, ...]:
    # the node's /etc/systemd/system (overlay upper) and /usr/lib/systemd/system
    return (node_dir / "etc-upper" / "systemd" / "system", node_dir / "units")


def _serve_address(argv: list[str], address: str) -> tuple[str, int] | None:
    """(host, port) of a `vllm serve` command line, None for any other command."""
    if len(argv) < 2 or Path(argv[0]).name != "vllm" or argv[1] != "serve":
        return None
    options: dict[str, str] = {}
    for i, word in enumerate(argv[2:], start=2):
        key, eq, value = word.partition("=")
        if key.startswith("--"):
            options[key] = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
    host = options.get("--host")
    return (address if host in WILDCARDS else str(host)), int(options.get("--port", DEFAULT_PORT))


def instance_urls(node_dir: Path) -> list[str]:
    """Base URLs of the vLLM instances running on a simulated node (active units running `vllm serve`)."""
    node = sim_state.load(node_dir)
    address = str(node.get("address") or "127.0.0.1")
    urls = []
    for name, unit in sorted(node.get("units", {}).items()):
        path = systemd_units.find(name, _unit_dirs(node_dir)) if unit.get("active") else None
        if path is None:
            continue
        for _, argv in systemd_units.exec_lines(systemd_units.load(name, path), "ExecStart"):
            where = _serve_address(argv, address)
            if where is not None:
                urls.append(f"http://{where[0]}:{where[1]}")
    return urls


def fleet_instance_urls(fleet_root: Path) -> list[str]:
    """Every node's instances, node by node (a fleet's nodes live in <root>/nodes/<name>)."""
    nodes = sorted(p for p in (fleet_root / "nodes").iterdir() if (p / sim_state.STATE_FILE).exists())
    return [url for node_dir in nodes for url in instance_urls(node_dir)]
