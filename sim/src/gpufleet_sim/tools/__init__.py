"""Fake device tools, run inside simulated nodes under the real command names.

Each tool module exposes ``main(argv: list[str], node_dir: Path) -> int`` and prints exactly
what the real tool prints (tests/fixtures/real is the reference). The node's sysfs tree is
at ``node_dir / "sys"`` (bind-mounted at /sys inside the node).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from pathlib import Path

# command name on the node's PATH -> module in this package
TOOLS = {
    "nvidia-smi": "nvidia_smi",
    "ibdev2netdev": "ibdev2netdev",
    "mlnx_qos": "mlnx_qos",
    "mlxlink": "mlxlink",
    "mlxconfig": "mlxconfig",
    "cma_roce_mode": "cma_roce_mode",
    "ethtool": "ethtool",
    "systemctl": "systemctl",
    "nvidia-persistenced": "nvidia_persistenced",
    "vllm": "vllm",
    "scontrol": "scontrol",
    "kubectl": "kubectl",
    "lldpctl": "lldpctl",
    "dmesg": "dmesg",
    "all_reduce_perf": "all_reduce_perf",
    "dcgmi": "dcgmi",
    "lspci": "lspci",
}
# Where a tool is installed on the node when not on the PATH (/usr/local/sbin): nccl-tests is built,
# not packaged, and run by its path (sim/node.py mounts the node's own /opt over the host's).
INSTALL_DIRS = {"all_reduce_perf": "/opt/nccl-tests/build"}


# Every call of a fake tool, one JSON line each ({"t", "argv"}), in the node's directory: what the
# code under test asked the node's tools, for tests to count (e.g. nvidia-smi -q -x per gate run).
# Outside the node's view of its own files; the tools answer exactly as before.
CALL_LOG = "tool_calls.jsonl"


def log_call(node_dir: Path, argv: list[str]) -> None:
    line = json.dumps({"t": round(time.time(), 3), "argv": argv}) + "\n"
    # One O_APPEND write per call: concurrent calls never interleave within a line.
    fd = os.open(node_dir / CALL_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)


def calls(node_dir: Path, command: str | None = None) -> list[list[str]]:
    """The argv of every logged call (of ``command`` only, when given), oldest first."""
    try:
        lines = (node_dir / CALL_LOG).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    argvs = [json.loads(line)["argv"] for line in lines if line.strip()]
    return [a for a in argvs if command is None or a[:1] == [command]]


def run(command: str, node_dir: str) -> int:
    module = importlib.import_module(f"gpufleet_sim.tools.{TOOLS[command]}")
    log_call(Path(node_dir), [command, *sys.argv[1:]])
    code: int = module.main(sys.argv[1:], Path(node_dir))
    return code
