"""`nvidia-smi -r` / `--gpu-reset` [-i ID[,ID]] on a simulated node: who may be reset, and what a reset does.

Behaviour and wording, from real sources (the option itself: "-r    --gpu-reset           Trigger reset of
the GPU." in the real H200 `nvidia-smi -h` capture, tests/fixtures/real/h200-device/nvidia-smi-help.txt):

- nvidia-smi(1), "-r, --gpu-reset": "Optional -i switch can be used to target one or more specific
  devices. Without this option, all GPUs are reset. [...] There can't be any applications using these
  devices (e.g. CUDA application, graphics application like X server, monitoring application like other
  instance of nvidia-smi)." Its NVSwitch table: on Ampere+ with Fabric Manager running "Each GPU can be
  reset individually", and "On Hopper and later NVSwitch systems, the dependency on Fabric Manager to
  facilitate reset is removed". Every simulated profile is Hopper or Blackwell on NVSwitch (h100-8, h200,
  b300-16), so a reset of part of an NVLink domain is allowed here; the pre-Ampere / Ampere-without-FM
  refusal ("an error identifying the additional GPUs that must be included") is not modelled: its real
  wording was not found.
- The refusal, on stdout, exit 255: "The following GPUs could not be reset:" then "  GPU <bus id>: In use
  by another client" for each GPU, an empty line, and "N device(s) is/are currently being used by one or
  more other processes (e.g., Fabric Manager, CUDA application, [...]). Please first kill all processes
  using this device/these devices and all compute applications running in the system." (NVIDIA
  mig-parted's log as quoted in ComputeCanada/puppet-magic_castle#387 and NVIDIA/gpu-operator users'
  notes, 1 and 4 devices; exit 255: NVIDIA/NVSentinel#1690, and a GKE H100 write-up, RESET_RC=255).
- Persistence mode counts as a client: "Where persistence mode is enabled, nvidia-persistenced holds an
  attachment to the device and the reset is refused" and "Disabling it is sufficient to make the same
  reset succeed" (NVIDIA/NVSentinel#1690 and PR #1692, 2026-08, so current drivers still refuse). A
  simulated GPU is busy when a process holds its memory (a vLLM engine, vllm_engine.claim_memory) or runs
  requests on it (its thermal load), or when its persistence mode is on.
- Success: "GPU 00000000:1A:00.0 was successfully reset." per GPU, exit 0 (NVIDIA/NVSentinel#1690); then
  "All done.", as nvidia-smi's other setters end (an nvidia-smi-compatible ixsmi capture prints the
  per-GPU lines then "All done.").
- A GPU that fell off the bus (Xid 79) is not listed by the driver: -i naming it finds no device (exit 6,
  as every -i does), and a reset without -i resets the others; only a reboot brings it back.

What a reset does to the GPU (as a reboot does to each GPU, sim/boot.py): a pending row remap is applied
(the row then counts as remapped), volatile ECC counts restart, a reset-class recovery action ("GPU
Reset", "Drain and Reset") is taken ("Node Reboot" stays: a reset does not satisfy it), the power limit
goes back to its default (volatile), the clocks event reasons to idle, the replay counter restarts.
The `row-remap-pending-persistent` fault (faults_health) is a row the hardware cannot remap: after every
reset (and every reboot, which resets each GPU) its remap is pending again and nothing was remapped
(stays_pending).
Every call is recorded in ``state["gpu_resets"]`` (argv, time, the bus ids reset or refused) for tests.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from gpufleet_sim import state as sim_state
from gpufleet_sim.state import State
from gpufleet_sim.tools import nvsmi_common as c

RC_RESET_REFUSED = 255  # nvidia-smi(1): "Other error or internal driver error occurred"
# The recovery actions a GPU reset takes; "Node Reboot" needs the node rebooted (sim/boot.py).
RESET_ACTIONS = ("GPU Reset", "Drain and Reset")
# A pending remap the hardware cannot carry out: back after every reset (faults_health injects it).
PERSISTENT_REMAP = "row-remap-pending-persistent"


def busy(gpu: c.Gpu) -> bool:
    """Whether a client holds the GPU, so the driver refuses to reset it."""
    load = gpu.get("load") or {}
    return (
        bool(gpu.get("persistence_mode"))
        or int(gpu.get("memory_used_mib", 0)) > 0
        or int(load.get("requests", 0)) > 0
    )


def refusal(bus_ids: list[str]) -> str:
    count = len(bus_ids)
    devices, verb, these = (
        ("device", "is", "this device") if count == 1 else ("devices", "are", "these devices")
    )
    lines = "".join(f"  GPU {bus}: In use by another client\n" for bus in bus_ids)
    return (
        f"The following GPUs could not be reset:\n{lines}\n"
        f"{count} {devices} {verb} currently being used by one or more other processes (e.g., Fabric "
        "Manager, CUDA application, graphics application such as an X server, or a monitoring application "
        f"such as another instance of nvidia-smi). Please first kill all processes using {these} and all "
        "compute applications running in the system.\n"
    )


def apply(gpu: c.Gpu, now: float) -> None:
    """The reset's effects on one GPU's state (a reboot's too: sim/boot.py)."""
    rows = gpu["remapped_rows"]
    if rows["pending"]:
        rows["pending"] = False
        rows["uncorrectable"] = int(rows["uncorrectable"]) + 1
    gpu["ecc"]["volatile_uncorrected"] = 0
    if gpu.get("recovery_action") in RESET_ACTIONS:
        gpu.pop("recovery_action", None)
    power = gpu["power"]
    power["requested_limit_w"] = power["default_limit_w"]
    power["enforced_limit_w"] = power["default_limit_w"]
    gpu["clocks_event_reasons"] = ["gpu_idle"]
    if gpu["pcie"].get("replays"):
        gpu["pcie"]["replays"]["t"] = now


def stays_pending(state: State, uuids: set[str]) -> None:
    """After a reset of the GPUs ``uuids``: the one with a row it cannot remap (PERSISTENT_REMAP) has
    it pending again, its remapped counts as before the reset (nothing was remapped)."""
    record = state.get("fault_saved", {}).get(PERSISTENT_REMAP)
    if PERSISTENT_REMAP not in state.get("faults", []) or not record or record["uuid"] not in uuids:
        return
    for gpu in state["gpus"]:
        if gpu["uuid"] == record["uuid"]:
            gpu["remapped_rows"] = {**record["remapped_rows"], "pending": True}


def reset(state: State, ids: str | None, argv: list[str]) -> tuple[str, int]:
    """Resets the GPUs ``ids`` names (all present GPUs without it), or none when any is in use:
    (what nvidia-smi prints, its exit status)."""
    now = time.time()
    selected = [gpu for _, gpu in c.select_gpus(state, ids)]
    refused = [str(gpu["pci_bus_id"]) for gpu in selected if busy(gpu)]
    record: dict[str, Any] = {"argv": list(argv), "time": now, "reset": [], "refused": refused}
    state.setdefault("gpu_resets", []).append(record)
    if refused:
        return refusal(refused), RC_RESET_REFUSED
    lines = []
    for gpu in selected:
        apply(gpu, now)
        record["reset"].append(str(gpu["pci_bus_id"]))
        lines.append(f"GPU {gpu['pci_bus_id']} was successfully reset.")
    stays_pending(state, {str(gpu["uuid"]) for gpu in selected})
    return "\n".join([*lines, "All done."]) + "\n", 0


def run(node_dir: Path, ids: str | None, argv: list[str]) -> str:
    """The fake nvidia-smi's -r: the state saved with the call's record, refused or not; a refusal is
    raised (c.ToolError) after the save."""
    with sim_state.locked(node_dir) as state:
        text, rc = reset(state, ids, argv)
    if rc:
        raise c.ToolError(text, rc)
    return text
