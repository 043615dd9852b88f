"""The simulated SONiC leaf's fake ``sonic-cfggen -d --print-data`` (sim/sonic.py): CONFIG_DB in
config_db.json's nested layout that the collection's own parser reads (sonic_qos.parse_config_db, the
parser of the real captures), from the same leaf state the NVUE leaves keep, so that every leaf fault
shows up in it as the check an NVUE leaf's reading fails."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible_collections.gpufleet.node.plugins.module_utils.fabric import sonic_leaf, switch_qos
from ansible_collections.gpufleet.node.plugins.module_utils.fabric.fabric import judge_switch_port
from gpufleet_sim import faults_switch, nvue, nvue_state, sonic

HOST = {"roce_dscp": 26, "cnp_dscp": 48, "priority": 3, "mtu": 4200}
# the module's defaults (the lossless RoCE profile), as the action plugin hands them to sonic_leaf.plan
PARAMS: dict[str, Any] = ArgumentSpecValidator(switch_qos.ARGUMENT_SPEC).validate({}).validated_parameters
FAULT_CHECKS = {
    "switch-pfc-off": "fabric.switch_pfc",
    "switch-ecn-off": "fabric.switch_ecn",
    "switch-dscp-lossy": "fabric.switch_dscp",
    "switch-mtu-low": "fabric.switch_mtu",
}


@pytest.fixture
def leaf(tmp_path: Path) -> Path:
    nvue.prepare(tmp_path, "leaf01", "127.0.93.211", ports=4)
    sonic.prepare(tmp_path, "leaf01", "127.0.93.211", 2222, "ssh-ed25519 AAAA test\n")
    return tmp_path


def _cfggen(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    tool = directory / "leaf01-sonic" / "bin" / "sonic-cfggen"
    return subprocess.run([str(tool), *args], capture_output=True, text=True, check=False, timeout=60)


def _failed(planned: dict[str, Any], port: str) -> dict[str, dict[str, Any]]:
    reading = planned["reading"]
    qos = reading["port_qos"].get(port, reading["qos"])
    checks = judge_switch_port(
        f"node01:mlx5_4 -> leaf01:{port}", HOST, qos, {"link": {"mtu": reading["mtu"][port]}}
    )
    return {c["name"].split("[")[0]: c for c in checks if not c["ok"]}


def test_a_healthy_leaf_prints_config_db_with_the_profile(leaf: Path) -> None:
    done = _cfggen(leaf, "-d", "--print-data")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert done.stdout == json.dumps(document, indent=4, sort_keys=True) + "\n"  # as sonic-cfggen prints
    assert sorted(document["PORT"]) == ["Ethernet0", "Ethernet16", "Ethernet24", "Ethernet8"]
    assert document["PORT"]["Ethernet8"]["alias"] == "swp2" and document["PORT"]["Ethernet8"]["mtu"] == "9216"
    assert document["PORT_QOS_MAP"]["Ethernet0"]["pfc_enable"] == "3"
    assert document["DSCP_TO_TC_MAP"]["AZURE"]["26"] == "3"
    planned = sonic_leaf.plan(done.stdout, PARAMS, "leaf01")
    assert planned["changes"] == [] and planned["reading"]["port_qos"] == {}
    for port in ("swp1", "Ethernet0", "swp4"):
        assert _failed(planned, port) == {}, port


def test_each_leaf_fault_fails_the_check_it_fails_on_an_nvue_leaf(leaf: Path) -> None:
    state = nvue.state_file(leaf, "leaf01")
    for fault, check in FAULT_CHECKS.items():
        assert faults_switch.inject_leaf(state, fault)
        planned = sonic_leaf.plan(_cfggen(leaf, "-d", "--print-data").stdout, PARAMS, "leaf01")
        assert sorted(_failed(planned, "swp1")) == [check], fault
        assert planned["changes"], fault
        faults_switch.clear_leaf(state, fault)
    planned = sonic_leaf.plan(_cfggen(leaf, "-d", "--print-data").stdout, PARAMS, "leaf01")
    assert planned["changes"] == []


def test_pfc_off_is_a_pfc_enable_drift_on_every_port(leaf: Path) -> None:
    faults_switch.inject_leaf(nvue.state_file(leaf, "leaf01"), "switch-pfc-off")
    planned = sonic_leaf.plan(_cfggen(leaf, "-d", "--print-data").stdout, PARAMS, "leaf01")
    assert [c["setting"] for c in planned["changes"]] == [
        f"PORT_QOS_MAP|Ethernet{n} pfc_enable" for n in (0, 8, 16, 24)
    ]
    assert _failed(planned, "swp3")["fabric.switch_pfc"]["value"] == []
    tree = nvue_state.view(nvue_state.load(nvue.state_file(leaf, "leaf01")), "operational")
    assert (
        tree is not None and "pfc_enable" not in sonic.config_db(tree, "leaf01")["PORT_QOS_MAP"]["Ethernet0"]
    )


def test_any_other_invocation_is_a_usage_error(leaf: Path) -> None:
    done = _cfggen(leaf, "-d", "-v", "PORT")
    assert done.returncode == 2 and "usage: sonic-cfggen -d --print-data" in done.stderr and done.stdout == ""
