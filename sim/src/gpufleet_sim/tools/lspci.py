"""The fake `lspci`: the node's PCI tree as ``lspci -D -vvv`` prints it (sim/gpudirect.py): each
PCIe bridge's Express port type and ACS capability and control, the GPUs and NICs by name.

Supported: ``-D`` (domain; always printed here), ``-v``/``-vv``/``-vvv``. Anything else: pciutils'
``lspci: invalid option`` on stderr, exit 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gpufleet_sim import gpudirect
from gpufleet_sim import state as sim_state


def main(argv: list[str], node_dir: Path) -> int:
    for arg in argv:
        if arg not in ("-D", "-v", "-vv", "-vvv"):
            print(f"lspci: invalid option -- '{arg.lstrip('-')[:1]}'", file=sys.stderr)
            return 2
    sys.stdout.write(gpudirect.lspci_vvv(sim_state.load(node_dir)))
    return 0
