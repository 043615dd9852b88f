"""The driver's persistence daemon: while it runs, every GPU is in persistence mode.

The simulated daemon does its work and returns (its unit is Type=forking, as NVIDIA's is);
its vendor unit calls `--gpufleet-sim-stopped` on stop, which the sim uses to turn it off.
"""

from __future__ import annotations

from pathlib import Path

from gpufleet_sim import state


def main(argv: list[str], node_dir: Path) -> int:
    enabled = "--gpufleet-sim-stopped" not in argv
    with state.locked(node_dir) as node:
        for gpu in node["gpus"]:
            gpu["persistence_mode"] = enabled
    return 0
