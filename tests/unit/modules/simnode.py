"""A simulated node behind AnsibleModule.run_command, for the GPU modules' tests.

nvidia-smi calls go to the simulator's fake nvidia-smi on a node directory (so its output is
the real format and -pl/-pm really change the node); systemctl answers from a small table of
units whose start turns persistence on, as the driver's daemon does. Every argv is recorded.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

from ansible_collections.gpufleet.node.plugins.module_utils.nccl import topology_xml
from gpufleet_sim import build, state, sysfs
from gpufleet_sim.tools import nvidia_smi
from gpufleet_sim.tools import nvsmi_common as c

from tests.unit.modules import harness

SMI = "/usr/bin/nvidia-smi"
SYSTEMCTL = "/usr/bin/systemctl"
UNIT = "nvidia-persistenced.service"
CPUINFO = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 207\n"


class SimNode:
    def __init__(self, node_dir: Path, profile: str = "b300-16", daemon: bool = True) -> None:
        self.dir = node_dir
        node_dir.mkdir(parents=True, exist_ok=True)
        node_state = build.build_node_state("node01", profile, 1)
        state.save(node_dir, node_state)
        sysfs.render(node_dir / "sys", node_state)
        self.units = {UNIT: {"enabled": True, "active": True}} if daemon else {}
        self.calls: list[list[str]] = []

    def state(self) -> dict[str, Any]:
        return state.load(self.dir)

    def change(self, fault: Any) -> None:
        with state.locked(self.dir) as node:
            fault(node, self.dir / "sys")

    def persistence(self, on: bool) -> None:
        with state.locked(self.dir) as node:
            for gpu in node["gpus"]:
                gpu["persistence_mode"] = on

    def __call__(self, module: Any, args: list[str], **kwargs: Any) -> tuple[int, str, str]:
        argv = list(args)
        self.calls.append(argv)
        assert kwargs.get("environ_update") == {"LC_ALL": "C"}, argv
        if argv[0] == SMI:
            try:
                return 0, nvidia_smi.run(argv[1:], self.dir), ""
            except c.ToolError as err:
                return err.rc, err.text, ""
        if argv[0] == SYSTEMCTL:
            return self.systemctl(argv[1], argv[2])
        raise AssertionError(f"unexpected command {argv}")

    def systemctl(self, verb: str, unit: str) -> tuple[int, str, str]:
        known = self.units.get(unit)
        if verb == "show":
            if known is None:
                return 0, f"Id={unit}\nLoadState=not-found\nActiveState=inactive\nUnitFileState=\n", ""
            active = "active" if known["active"] else "inactive"
            enabled = "enabled" if known["enabled"] else "disabled"
            return (
                0,
                f"Id={unit}\nLoadState=loaded\nActiveState={active}\nUnitFileState={enabled}\n",
                "",
            )
        assert known is not None, f"systemctl {verb} {unit}: no such unit"
        if verb == "enable":
            known["enabled"] = True
        elif verb in ("start", "restart"):
            known["active"] = True
            self.persistence(True)
        else:
            raise AssertionError(f"unexpected systemctl {verb}")
        return 0, "", ""


def _which(self: Any, name: str, required: bool = False, opt_dirs: Any = None) -> str | None:
    return {"nvidia-smi": SMI, "systemctl": SYSTEMCTL}.get(name)


def run_module(main: Any, args: dict[str, Any], node: SimNode, check_mode: bool = False, diff: bool = False):
    """Run a module's main() against the node; returns (result, warnings)."""
    run = harness.run_module(main, args, check_mode, diff, run_command=node, get_bin_path=_which)
    return run.result, run.warnings


@contextmanager
def topology_node(tmp_path: Path) -> Iterator[SimNode]:
    """A SimNode whose sysfs and /proc/cpuinfo (CPUINFO, one Intel CPU) topology_xml reads."""
    sim = SimNode(tmp_path / "node")
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(CPUINFO)
    with (
        mock.patch.object(topology_xml, "SYS_ROOT", str(sim.dir / "sys")),
        mock.patch.object(topology_xml, "CPUINFO", str(cpuinfo)),
    ):
        yield sim
