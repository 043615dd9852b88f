"""The vLLM stand-in for the conformance tests: ``vllm serve`` as a simulated node runs it, in a
process of its own on 127.0.0.1.

``serving`` lays out one node's state (as the Fleet builds it), starts the node's ``vllm`` command
(gpufleet_sim.tools.vllm, with the node's stdlib-only Python, as sim/node.py's tool client runs it)
for one NVLink baseboard's GPUs, waits for ``/health``, yields its base URL, and stops it with
SIGTERM on leaving (it must exit 0, as vLLM's server does).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gpufleet_sim import build, state
from gpufleet_sim.ports import free_port

SRC = Path(__file__).resolve().parents[2] / "sim" / "src"
NODE_PYTHON = "/usr/bin/python3"
ADDRESS = "127.0.0.1"
MODEL = "zai-org/GLM-5.2-NVFP4"
SERVED_NAME = "glm52"
START_S = 20
STOP_S = 15


def _started(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def serving(root: Path, max_model_len: int = 8192) -> Iterator[str]:
    node = build.build_node_state("node01", "b300-16", 1)
    node["serving"]["startup_s"] = 0.2  # no weights to load
    node_dir = root / "node01"
    node_dir.mkdir(parents=True)
    state.save(node_dir, node)
    board = [g["uuid"] for g in state.present_gpus(node) if g["nvlink_domain"] == 0]
    port = free_port(ADDRESS)
    code = f"import sys; sys.path.insert(0, {str(SRC)!r}); from pathlib import Path; "
    code += "from gpufleet_sim.tools import vllm; "
    code += f"sys.exit(vllm.main(sys.argv[1:], Path({str(node_dir)!r})))"
    argv = [NODE_PYTHON, "-sS", "-c", code, "serve", MODEL, "--served-model-name", SERVED_NAME]
    argv += ["--tensor-parallel-size", str(len(board)), "--max-model-len", str(max_model_len)]
    argv += ["--host", ADDRESS, "--port", str(port)]
    env = {"PATH": os.environ["PATH"], "CUDA_VISIBLE_DEVICES": ",".join(board)}
    log = root / "vllm.log"
    with log.open("w") as output:
        process = subprocess.Popen(argv, env=env, stdout=output, stderr=subprocess.STDOUT)
    url = f"http://{ADDRESS}:{port}"
    try:
        deadline = time.monotonic() + START_S
        while not _started(url):
            assert process.poll() is None, f"the stand-in exited {process.returncode}: {log.read_text()}"
            assert time.monotonic() < deadline, f"the stand-in did not answer within {START_S} s"
            time.sleep(0.1)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
    assert process.returncode == 0, log.read_text()
