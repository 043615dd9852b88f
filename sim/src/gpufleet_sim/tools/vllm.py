"""The node's `vllm` command: `vllm serve MODEL [options]` starts a stand-in OpenAI-compatible
server (gpufleet_sim.tools.vllm_http) that loads the GPUs CUDA_VISIBLE_DEVICES names.

What it shares with the real one: its options (those the reference deployment uses and a few
common ones; anything else is an argparse error, exit 2), CUDA's device selection (UUIDs, unique
UUID prefixes or indices; the list ends at the first entry that matches nothing), vLLM's startup
failures (no GPUs, fewer GPUs than tensor x pipeline parallel, not enough free GPU memory, the
port taken), a load time before the port opens, and SIGTERM as a clean shutdown.

The node shares the host's network namespace with the other nodes, so a wildcard --host
(0.0.0.0, ::, or none) binds the node's own address, where other nodes' instances are not.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from gpufleet_sim import state as sim_state
from gpufleet_sim.tools.vllm_engine import Config, Engine
from gpufleet_sim.tools.vllm_http import VERSION, Server

WILDCARDS = (None, "", "0.0.0.0", "::")
DRAIN_S = 5.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vllm serve", description="Start the vLLM OpenAI Compatible API server."
    )
    parser.add_argument("model")
    parser.add_argument("--host", default=None)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    parser.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    parser.add_argument("--max-model-len", type=int, default=8192)
    parser.add_argument("--max-num-seqs", type=int, default=256)
    parser.add_argument("--max-num-batched-tokens", type=int, default=8192)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    parser.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--swap-space", type=float, default=4.0)
    parser.add_argument("--trust-remote-code", action="store_true")
    parser.add_argument("--served-model-name", nargs="+", default=None)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--kv-cache-dtype", default="auto")
    parser.add_argument("--quantization", "-q", default=None)
    parser.add_argument("--enforce-eager", action="store_true")
    parser.add_argument("--download-dir", default=None)
    parser.add_argument("--disable-log-requests", action="store_true")
    parser.add_argument("--disable-log-stats", action="store_true")
    parser.add_argument("--uvicorn-log-level", default="info")
    return parser


def _log(message: str) -> None:
    stamp = time.strftime("%m-%d %H:%M:%S")
    print(f"INFO {stamp} [api_server.py] {message}", flush=True)


def _fail(message: str) -> int:
    print(message, file=sys.stderr, flush=True)
    return 1


def visible_gpus(node: sim_state.State, value: str | None) -> list[dict[str, Any]]:
    """The GPUs CUDA would expose for CUDA_VISIBLE_DEVICES=value, in that order."""
    present = sim_state.present_gpus(node)
    if value is None:
        return present
    chosen: list[dict[str, Any]] = []
    for raw in value.split(","):
        token = raw.strip()
        if token.isdigit() and int(token) < len(present):
            match = [present[int(token)]]
        elif token.startswith(("GPU-", "MIG-")):
            match = [g for g in present if str(g["uuid"]).startswith(token)]
        else:
            match = []
        if len(match) != 1 or match[0] in chosen:
            break  # CUDA stops at the first entry it cannot use
        chosen.append(match[0])
    return chosen


def bind_host(node: sim_state.State, host: str | None) -> str:
    if host in WILDCARDS:
        return str(node.get("address") or "0.0.0.0")
    return str(host)


def serve(args: argparse.Namespace, node_dir: Path) -> int:
    stopping = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    node = sim_state.load(node_dir)
    world = args.tensor_parallel_size * args.pipeline_parallel_size
    gpus = visible_gpus(node, os.environ.get("CUDA_VISIBLE_DEVICES"))
    _log(f"vLLM API server version {VERSION}")
    _log(f"non-default args: model={args.model!r}, tensor_parallel_size={args.tensor_parallel_size}")
    if not gpus:
        return _fail("RuntimeError: No CUDA GPUs are available")
    if world > len(gpus):
        return _fail(
            f"ValueError: World size ({world}) is larger than the number of available GPUs "
            f"({len(gpus)}) in this node."
        )
    config = Config(
        model=args.model,
        served_name=(args.served_model_name or [args.model])[0],
        tensor_parallel_size=args.tensor_parallel_size,
        max_model_len=args.max_model_len,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        gpu_memory_utilization=args.gpu_memory_utilization,
        prefix_caching=args.enable_prefix_caching,
        swap_space=args.swap_space,
    )
    engine = Engine(node_dir, config, [str(g["uuid"]) for g in gpus[:world]])
    try:
        engine.claim_memory()
    except MemoryError as exc:
        return _fail(f"ValueError: {exc}")
    try:
        return _run(engine, node, args, stopping)
    finally:
        engine.release()


def _run(engine: Engine, node: sim_state.State, args: argparse.Namespace, stopping: threading.Event) -> int:
    # loading weights and capturing graphs: the port stays closed meanwhile, as vLLM's does
    if stopping.wait(float(node.get("serving", {}).get("startup_s", 2.0))):
        return 0
    host = bind_host(node, args.host)
    try:
        server = Server((host, args.port), engine)
    except OSError as exc:
        return _fail(
            f"OSError: [Errno {exc.errno}] error while attempting to bind on address ({host!r}, {args.port})"
        )
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    print(f"INFO:     Uvicorn running on http://{host}:{args.port} (Press CTRL+C to quit)", flush=True)
    print("INFO:     Application startup complete.", flush=True)
    stopping.wait()
    print("INFO:     Shutting down", flush=True)
    server.shutdown()
    server.server_close()
    thread.join()
    # let requests in flight finish, so their load is taken off the GPUs by their own hands
    deadline = time.monotonic() + DRAIN_S
    while engine.snapshot()["running"] and time.monotonic() < deadline:
        time.sleep(0.05)
    print("INFO:     Application shutdown complete.", flush=True)
    return 0


def main(argv: list[str], node_dir: Path) -> int:
    if argv[:1] in (["--version"], ["-v"], ["version"]):
        print(VERSION)
        return 0
    if argv[:1] != ["serve"]:
        print("usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...", file=sys.stderr)
        return 2
    return serve(_parser().parse_args(argv[1:]), node_dir)
