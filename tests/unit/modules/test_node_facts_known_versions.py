"""node_facts' known_versions (drift): the inventory's thermal_gate_fleet_versions returned beside the node's
versions, for drift's fleet.versions judge; an entry of another shape refused as a configuration error."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import rdma_read
from ansible_collections.gpufleet.node.plugins.modules import node_facts

from tests.unit.modules.simnode import SimNode, run_module, topology_node

KNOWN = {"NVIDIA B300 SXM6 AC": {"vbios": "97.10.4A.00.02", "cuda": "13.0"}}


@pytest.fixture
def node(tmp_path: Path):
    with (
        topology_node(tmp_path) as sim,
        mock.patch.object(rdma_read, "SYSFS_ROOT", str(tmp_path / "no-rdma")),
    ):
        yield sim


def test_the_known_versions_come_back_beside_the_versions(node: SimNode, tmp_path: Path) -> None:
    options = {"nccl_topology": {"path": str(tmp_path / "topo.xml")}, "versions": True}
    compared, _ = run_module(node_facts.main, dict(options, known_versions=KNOWN), node)
    assert compared["ansible_facts"]["gpufleet_known_versions"] == KNOWN
    assert compared["ansible_facts"]["gpufleet_versions"]["vbios"] == ["97.10.4A.00.02"]
    # none set (the inventory's default {}), or versions not read (provision, the gate): no such fact
    unset, _ = run_module(node_facts.main, dict(options, known_versions={}), node)
    assert "gpufleet_known_versions" not in unset["ansible_facts"]
    without, _ = run_module(node_facts.main, dict(options, versions=False, known_versions=KNOWN), node)
    assert "ansible_facts" not in without


def test_known_versions_of_another_shape_are_a_configuration_error(node: SimNode, tmp_path: Path) -> None:
    options = {"nccl_topology": {"path": str(tmp_path / "topo.xml")}, "versions": True}
    refused, _ = run_module(
        node_facts.main, dict(options, known_versions={"NVIDIA B300 SXM6 AC": {"cuda": 13.0}}), node
    )
    assert refused["failed"] is True and refused["input_error"] is True
    assert (
        "thermal_gate_fleet_versions['NVIDIA B300 SXM6 AC'][cuda] must be a version string" in refused["msg"]
    )
    assert node.calls == []  # refused before anything was read
