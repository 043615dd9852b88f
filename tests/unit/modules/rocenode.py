"""A simulated node and its two leaves for the RoCE counter tests: the node's `ethtool -S` and sysfs
hw_counters are the simulator's (sim/roce_traffic.py), its clock is the test's.

``<tmp>/fleet/nodes/node01`` is a b300-16 node built by sim/build.py (cabled to leaf01 and leaf02,
sysfs rendered by sim/sysfs.py); ``<tmp>/fleet/leaves/leafNN.json`` are the leaves' NVUE states
(sim/nvue.prepare). ``run_command`` answers ``ethtool`` with the fake tool at ``now`` and records
every argv with its keyword arguments; ``sleep`` moves ``now``.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import rdma_read
from gpufleet_sim import build, faults_rdma, nvue, nvue_state, state, sysfs, sysfs_rdma, thermal
from gpufleet_sim.tools import ethtool

ETHTOOL = "/usr/sbin/ethtool"
START = 1_800_000_000.0


class RoceNode:
    def __init__(self, tmp_path: Path) -> None:
        self.fleet = tmp_path / "fleet"
        self.dir = self.fleet / "nodes" / "node01"
        self.dir.mkdir(parents=True)
        built = build.build_node_state("node01", "b300-16", 1)
        state.save(self.dir, built)
        sysfs.render(self.dir / "sys", built)
        for leaf in ("leaf01", "leaf02"):
            nvue.prepare(self.fleet / "leaves", leaf, "127.0.0.2", ports=build.LEAF_PORTS)
        self.now = START
        self.calls: list[tuple[list[str], dict[str, Any]]] = []
        # argv -> (rc, stdout, stderr) that replaces the fake tool's answer
        self.answers: dict[tuple[str, ...], tuple[int, str, str]] = {}

    @property
    def root(self) -> str:
        return str(self.dir)

    def nics(self) -> list[dict[str, Any]]:
        nics: list[dict[str, Any]] = state.load(self.dir)["nics"]
        return nics

    def ports(self) -> list[dict[str, Any]]:
        return [{"ibdev": n["ibdev"], "port": n["port"], "netdev": n["netdev"]} for n in self.nics()]

    def on_leaf(self, leaf: str) -> list[str]:
        return [n["ibdev"] for n in self.nics() if n["neighbor"]["chassis"] == leaf]

    def leaf(self, name: str, edit: Callable[[dict[str, Any]], None]) -> None:
        with nvue_state.locked(self.fleet / "leaves" / f"{name}.json") as leaf_state:
            edit(leaf_state["applied"])

    def load(self, requests: int) -> None:
        """``requests`` in flight on every GPU from now on (what the fake vLLM does per request)."""
        with state.locked(self.dir) as node:
            thermal.change_load(node, [g["uuid"] for g in node["gpus"]], requests, self.now)

    def clock(self) -> float:
        return self.now

    def link(self, ibdev: str, up: bool) -> None:
        """The port's link up or down now (what the link-down fault does to its last port)."""
        with state.locked(self.dir) as node:
            nic = next(n for n in node["nics"] if n["ibdev"] == ibdev)
            faults_rdma.set_port_link(node, self.dir / "sys", nic, up, self.now)

    def rate(self, ibdev: str, gbps: int) -> None:
        """The port retrained to ``gbps`` (sysfs rate and netdev speed)."""
        with state.locked(self.dir) as node:
            nic = next(n for n in node["nics"] if n["ibdev"] == ibdev)
            nic["speed_gbps"] = gbps
            sysfs_rdma.set_link(node, nic, self.dir / "sys", up=True)

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def run_command(self, args: list[str], **kwargs: Any) -> tuple[int, str, str]:
        self.calls.append((list(args), kwargs))
        if tuple(args) in self.answers:
            return self.answers[tuple(args)]
        assert os.path.basename(args[0]) == "ethtool", args
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = ethtool.main(list(args[1:]), self.dir)
        return rc, out.getvalue(), err.getvalue()


def switch_pfc_off(tree: dict[str, Any]) -> None:
    """The leaf fault switch-pfc-off: priority 3 out of the PFC profile."""
    del tree["qos"]["pfc"]["default-global"]["switch-priority"]["3"]


def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RoceNode:
    """A RoceNode whose sysfs module_utils.rdma.rdma_read reads and whose fake ethtool runs on its clock."""
    node = RoceNode(tmp_path)
    monkeypatch.setattr(rdma_read, "SYSFS_ROOT", node.root)
    monkeypatch.setattr(ethtool, "time", SimpleNamespace(time=node.clock))
    return node


def switch_ecn_off(tree: dict[str, Any]) -> None:
    """The leaf fault switch-ecn-off: no ECN marking on the RoCE traffic class."""
    classes = tree["qos"]["congestion-control"]["default-global"]["traffic-class"]
    classes.setdefault(str(nvue_state.ROCE_TRAFFIC_CLASS), {})["ecn"] = "disable"
