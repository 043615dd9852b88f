"""Fake device tools, run inside simulated nodes under the real command names.

Each tool module exposes ``main(argv: list[str], node_dir: Path) -> int`` and prints exactly
what the real tool prints (shared/fixtures/real is the reference). The node's sysfs tree is
at ``node_dir / "sys"`` (bind-mounted at /sys inside the node).
"""

from __future__ import annotations

import importlib
import sys
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
}


def run(command: str, node_dir: str) -> int:
    module = importlib.import_module(f"gpufleet.sim.tools.{TOOLS[command]}")
    code: int = module.main(sys.argv[1:], Path(node_dir))
    return code
