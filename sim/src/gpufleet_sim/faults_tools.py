"""Faults in what a node's tools print, not in its hardware: output gpufleet must refuse by name.

nvsmi-oversized-field: ``nvidia-smi -q -x`` prints the first GPU's product name 2 MB long (as a
damaged driver or a forged tool could); every other reading, and every other nvidia-smi query, is as
before. The tool reads the fault from the state's fault list (sim/tools/nvsmi_xml.py).
"""

from __future__ import annotations

from pathlib import Path

from gpufleet_sim.state import State

NVSMI_OVERSIZED_FIELD = "nvsmi-oversized-field"

# How long the oversized product name is: far past any field nvidia-smi prints.
OVERSIZED_FIELD_CHARS = 2 * 1024 * 1024


def nvsmi_oversized_field(state: State, sys_root: Path) -> None:
    """Nothing to set: the fault's name in ``state["faults"]`` is the condition."""


def oversized(state: State, value: str) -> str:
    """``value`` as the faulted tool prints it: padded to OVERSIZED_FIELD_CHARS when the fault is on."""
    if NVSMI_OVERSIZED_FIELD not in state.get("faults", []):
        return value
    return value + "X" * max(OVERSIZED_FIELD_CHARS - len(value), 0)


FAULTS = {
    NVSMI_OVERSIZED_FIELD: (nvsmi_oversized_field, nvsmi_oversized_field),
}
