"""node_versions: the node's driver, CUDA, VBIOS and NIC firmware for drift, from node_health's read of
the simulator's nvidia-smi (the real -q -x format) and sysfs; a read that fails is a failed check."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.node import node_versions
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import rdma_read
from gpufleet_sim import faults_health

from tests.unit.modules.simnode import SMI, SimNode
from tests.unit.sim_versions import versions


class Module:
    """What node_versions.read uses of an AnsibleModule: run_command and get_bin_path."""

    def __init__(self, node: SimNode, smi: str | None = SMI) -> None:
        self.node = node
        self.smi = smi

    def run_command(self, args: list[str], **kwargs: Any) -> tuple[int, str, str]:
        return self.node(self, args, **kwargs)

    def get_bin_path(self, name: str, required: bool = False, opt_dirs: Any = None) -> str | None:
        return self.smi if name == "nvidia-smi" else None


@pytest.fixture
def node(tmp_path: Path):
    sim = SimNode(tmp_path / "node")
    with mock.patch.object(rdma_read, "SYSFS_ROOT", str(sim.dir)):
        yield sim


def test_the_versions_are_node_healths_from_one_read(node: SimNode) -> None:
    found, failed = node_versions.read(Module(node))
    assert failed == []
    assert node.calls == [[SMI, "-q", "-x"]]
    assert found == versions()


def test_a_node_with_other_firmware_reads_it(node: SimNode) -> None:
    node.change(faults_health.firmware_mismatch)
    found, _ = node_versions.read(Module(node))
    assert found is not None
    assert (found["vbios"], found["nic_firmware"]) == (["97.10.4A.00.01"], ["40.44.1035"])


def test_no_nvidia_smi_is_a_failed_check_naming_it(node: SimNode) -> None:
    found, (failed,) = node_versions.read(Module(node, smi=None))
    assert found is None and node.calls == []
    assert (failed["name"], failed["ok"]) == ("fleet.versions", False)
    assert "nvidia-smi is not installed" in failed["message"]
    assert "not compared with its peers" in failed["message"]


def test_an_nvidia_smi_that_fails_is_a_failed_check_naming_the_read(node: SimNode) -> None:
    module = Module(node)
    failing = (9, "", "NVIDIA-SMI has failed: driver not loaded")
    module.run_command = lambda args, **kwargs: failing  # type: ignore[method-assign]
    found, (failed,) = node_versions.read(module)
    assert found is None and failed["ok"] is False
    assert "nvidia-smi -q -x failed (rc=9): NVIDIA-SMI has failed" in failed["message"]


def test_a_bad_nvidia_smi_path_is_a_failed_check(node: SimNode, tmp_path: Path) -> None:
    found, (failed,) = node_versions.read(Module(node), str(tmp_path / "nope"))
    assert found is None and "nvidia_smi_path" in failed["message"]
