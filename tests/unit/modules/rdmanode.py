"""A simulated mlx5 node for the RDMA modules' tests: the simulator's b300-16 node state and NIC sysfs
under a temporary root, its fake tools behind AnsibleModule.run_command (installed in /usr/sbin), and
every argv the module ran."""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from ansible.module_utils import basic
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import rdma_read
from gpufleet_sim import build, faults_rdma, state, sysfs_rdma

BIN = "/usr/sbin"


class RdmaNode:
    """A fake node: its sysfs under ``root``, the tools it has, the commands the module ran."""

    def __init__(self, root: Path, tools: dict[str, Any]) -> None:
        self.root = root
        self.tools = tools
        self.installed = set(tools)
        self.calls: list[list[str]] = []
        self.envs: list[dict[str, str] | None] = []
        # tool name -> callable(args) returning (rc, out, err), or None to run the fake tool
        self.override: dict[str, Callable[[list[str]], tuple[int, str, str] | None]] = {}

    def run_command(self, args: list[str], environ_update: dict[str, str] | None = None, **_: Any) -> Any:
        self.calls.append(list(args))
        self.envs.append(environ_update)
        name = os.path.basename(args[0])
        answer = self.override[name](list(args)) if name in self.override else None
        if answer is not None:
            return answer
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = self.tools[name].main(list(args[1:]), self.root)
        return rc, out.getvalue(), err.getvalue()

    def get_bin_path(
        self, module: Any, name: str, required: bool = False, opt_dirs: Any = None
    ) -> str | None:
        if name in self.installed:
            return f"{BIN}/{name}"
        if required:
            module.fail_json(msg=f"Failed to find required executable {name!r}")
        return None

    def fault(self, name: str) -> None:
        with state.locked(self.root) as current:
            faults_rdma.FAULTS[name][0](current, self.root / "sys")

    def snapshot(self) -> dict[str, str]:
        """Every file of the node (state and sysfs), to prove a run wrote nothing."""
        return {
            str(p.relative_to(self.root)): p.read_text(encoding="utf-8")
            for p in sorted(self.root.rglob("*"))
            if p.is_file() and not p.is_symlink() and p.name != "state.lock"
        }


Node = TypeVar("Node", bound=RdmaNode)


def render(root: Path) -> None:
    """A b300-16 node under ``root``: its state plus, per NIC, a PCI function directory and its RDMA sysfs."""
    sys_root = root / "sys"
    sys_root.mkdir(parents=True)
    node_state = build.build_node_state("b300-node-0", "b300-16", 0)
    for nic in node_state["nics"]:
        pci_dir = sys_root / "devices" / "pci0000:00" / nic["pci_bus_id"]
        pci_dir.mkdir(parents=True)
        for name, value in (
            ("vendor", "0x15b3"),
            ("device", nic["pci_device_id"]),
            ("numa_node", nic["numa_node"]),
        ):
            (pci_dir / name).write_text(f"{value}\n", encoding="utf-8")
        sysfs_rdma.render_nic(node_state, nic, pci_dir, sys_root)
    state.save(root, node_state)


def install(node: Node, monkeypatch: pytest.MonkeyPatch) -> Node:
    """Render the node under ``node.root`` and put it behind AnsibleModule and module_utils.rdma.rdma_read."""
    render(node.root)
    monkeypatch.setattr(rdma_read, "SYSFS_ROOT", str(node.root))
    monkeypatch.setattr(
        basic.AnsibleModule, "run_command", lambda self, args, **kw: node.run_command(args, **kw)
    )
    monkeypatch.setattr(
        basic.AnsibleModule,
        "get_bin_path",
        lambda module, *args, **kw: node.get_bin_path(module, *args, **kw),
    )
    return node
