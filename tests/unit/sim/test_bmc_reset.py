"""The simulated BMC's host: the ComputerSystem and its PowerState, the ComputerSystem.Reset action over
TLS (validated as bmcweb validates it, handed to the node's Fleet by file), and what the Fleet does with
each request (node_power.plan, Fleet.service_requests)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gpufleet_sim import faults, node_power, state
from gpufleet_sim.bmc import resources
from gpufleet_sim.fleet import Fleet, FleetConfig

from tests.unit.sim.test_bmc import Client, basic, bmc, crawl, node_dir, view

__all__ = ["bmc", "node_dir"]  # the fixtures, shared with test_bmc (the BMC of the node at node_dir)

RESET = resources.RESET_TARGET
ACTION = "ComputerSystem.Reset"
ALLOWED = ["ForceOff", "PowerCycle", "On", "ForceOn", "ForceRestart", "GracefulRestart", "GracefulShutdown"]


# -- the resources ----------------------------------------------------------------------------
def test_the_host_is_a_computer_system_linked_both_ways(node_dir: Path) -> None:
    seen = crawl(view(node_dir))
    root = seen[resources.ROOT]
    assert root["Systems"] == {"@odata.id": "/redfish/v1/Systems"}
    systems = seen["/redfish/v1/Systems"]
    assert systems["@odata.type"] == "#ComputerSystemCollection.ComputerSystemCollection"
    assert systems["Members"] == [{"@odata.id": "/redfish/v1/Systems/system"}]
    system = seen["/redfish/v1/Systems/system"]
    assert system["@odata.type"] == "#ComputerSystem.v1_22_0.ComputerSystem"
    assert (system["Id"], system["HostName"], system["PowerState"]) == ("system", "node01", "On")
    assert system["Status"] == {"State": "Enabled", "Health": "OK"}
    assert system["Links"] == {
        "Chassis": [{"@odata.id": resources.CHASSIS}],
        "ManagedBy": [{"@odata.id": "/redfish/v1/Managers/BMC"}],
    }
    assert seen[resources.CHASSIS]["Links"]["ComputerSystems"] == [
        {"@odata.id": "/redfish/v1/Systems/system"}
    ]
    assert seen["/redfish/v1/Managers/BMC"]["Links"]["ManagerForServers"] == [
        {"@odata.id": "/redfish/v1/Systems/system"}
    ]
    assert system["Actions"] == {
        "#ComputerSystem.Reset": {
            "target": "/redfish/v1/Systems/system/Actions/ComputerSystem.Reset",
            "ResetType@Redfish.AllowableValues": ALLOWED,
        }
    }


@pytest.mark.parametrize(
    ("power", "status"),
    [("Off", "Disabled"), ("PoweringOn", "Starting"), ("PoweringOff", "Disabled"), ("On", "Enabled")],
)
def test_power_state_follows_the_node_state(node_dir: Path, power: str, status: str) -> None:
    with state.locked(node_dir) as current:
        current["power_state"] = power
    served = crawl(view(node_dir))
    assert served[resources.SYSTEM]["PowerState"] == power
    assert served[resources.SYSTEM]["Status"]["State"] == status
    assert served[resources.CHASSIS]["PowerState"] == power


# -- what the Fleet does with a request ---------------------------------------------------------
@pytest.mark.parametrize(
    ("reset_type", "power", "os_answers", "what"),
    [
        ("ForceRestart", "On", True, node_power.REBOOT),
        ("ForceRestart", "On", False, node_power.REBOOT),
        ("PowerCycle", "On", False, node_power.REBOOT),
        ("reboot", "On", False, node_power.REBOOT),  # gpufleet-sim reboot
        ("ForceRestart", "Off", False, node_power.POWER_ON),
        ("PowerCycle", "Off", False, node_power.POWER_ON),
        ("GracefulRestart", "On", True, node_power.REBOOT),
        ("GracefulRestart", "On", False, node_power.IGNORE),  # hung, or its sshd gone
        ("GracefulShutdown", "On", True, node_power.POWER_OFF),
        ("GracefulShutdown", "On", False, node_power.IGNORE),
        ("GracefulRestart", "Off", False, node_power.IGNORE),
        ("ForceOff", "On", False, node_power.POWER_OFF),
        ("ForceOff", "Off", False, node_power.IGNORE),
        ("On", "Off", False, node_power.POWER_ON),
        ("ForceOn", "Off", False, node_power.POWER_ON),
        ("On", "On", True, node_power.IGNORE),
        ("Nmi", "On", True, node_power.IGNORE),
    ],
)
def test_what_each_reset_does(reset_type: str, power: str, os_answers: bool, what: str) -> None:
    assert node_power.plan(reset_type, power, os_answers)[0] == what


def test_a_hung_node_does_not_answer_and_a_power_cycle_ends_the_hang(node_dir: Path) -> None:
    assert node_power.answers(state.load(node_dir))
    # no fleet record beside this node: the fault signals nothing, and is listed
    assert faults.inject(node_dir, node_power.HUNG)
    current = state.load(node_dir)
    assert not node_power.answers(current)
    node_power.powered_down(current, node_power.POWERING_ON)
    assert node_power.answers(current) and current["power_state"] == "PoweringOn"


def test_a_node_that_ignores_graceful_requests_is_brought_down_only_by_a_forced_reset(node_dir: Path) -> None:
    """graceful-ignored: a shutdown stuck on its driver. The OS does not act on GracefulRestart while the
    node otherwise runs (its sshd answers); a forced reset works (test_fake_health_tools: the reboot
    ends the fault)."""
    assert faults.inject(node_dir, node_power.GRACEFUL_IGNORED)
    current = state.load(node_dir)
    assert not node_power.answers(current)
    assert node_power.plan("GracefulRestart", "On", node_power.answers(current))[0] == node_power.IGNORE
    assert node_power.plan("ForceRestart", "On", node_power.answers(current))[0] == node_power.REBOOT


class Running:
    """A node process that runs (Popen's poll)."""

    def poll(self) -> None:
        return None


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[tuple[Fleet, list[tuple[str, str]]]]:
    """A Fleet of two described nodes whose reboot, power off and power on are recorded, not done."""
    fleet = Fleet(tmp_path / "sim")
    config = FleetConfig(nodes=2, subnet="127.0.9")
    for spec in fleet.specs(config):
        spec.directory.mkdir(parents=True)
        state.save(spec.directory, {"name": spec.name, "faults": []})
    fleet.fleet_file.write_text(json.dumps({"config": config.__dict__}), encoding="utf-8")
    done: list[tuple[str, str]] = []
    fleet.reboot = lambda name, timeout=0.0: done.append(("reboot", name))  # type: ignore[method-assign]
    fleet.power_off = lambda name, why: done.append(("power off", name))  # type: ignore[method-assign]
    fleet._power_on = lambda spec, timeout: done.append(("power on", spec.name))  # type: ignore[method-assign]
    fleet.processes = {"node01": Running(), "node02": Running()}  # type: ignore[dict-item]
    yield fleet, done


def test_the_fleet_services_each_request_and_answers_beside_it(fleet: tuple[Fleet, Any]) -> None:
    owned, done = fleet
    node01, node02 = owned.root / "nodes" / "node01", owned.root / "nodes" / "node02"
    node_power.request(node01, "ForceRestart")
    node_power.request(node02, "GracefulRestart")
    faults.inject(node02, node_power.HUNG)
    lines = owned.service_requests()
    assert lines == [
        "node01 ForceRestart: ok",
        "node02 GracefulRestart: ignored: the OS does not answer (hung, or its sshd is gone)",
    ]
    assert done == [("reboot", "node01")]
    assert (node01 / "reboot.done").read_text() == "ok"
    assert not (node01 / "reboot.request").exists() and not list(node01.glob("*.taken"))
    assert owned.service_requests() == []  # each request is carried out once
    # gpufleet-sim reboot's request ("reboot"), an Off node powered on, a node whose sshd died
    (node01 / "reboot.request").write_text("reboot")
    with state.locked(node02) as current:
        current["power_state"] = "Off"
    assert owned.service_requests() == ["node01 reboot: ok"]
    node_power.request(node02, "PowerCycle")
    assert owned.service_requests() == ["node02 PowerCycle: ok"]
    assert done[1:] == [("reboot", "node01"), ("power on", "node02")]
    del owned.processes["node01"]
    node_power.request(node01, "GracefulShutdown")
    assert owned.service_requests() == [
        "node01 GracefulShutdown: ignored: the OS does not answer (hung, or its sshd is gone)"
    ]


def test_a_failed_reset_is_the_answer_and_the_next_is_still_serviced(fleet: tuple[Fleet, Any]) -> None:
    owned, _ = fleet

    def fails(name: str, timeout: float = 0.0) -> None:
        raise OSError("the node would not start")

    owned.reboot = fails  # type: ignore[method-assign]
    node_power.request(owned.root / "nodes" / "node01", "ForceRestart")
    node_power.request(owned.root / "nodes" / "node02", "ForceOff")
    assert owned.service_requests() == [
        "node01 ForceRestart: error: OSError: the node would not start",
        "node02 ForceOff: ok",
    ]


# -- the action over TLS ------------------------------------------------------------------------
def test_a_reset_is_left_for_the_fleet_and_answered_204(bmc: tuple[Client, str, Any], node_dir: Path) -> None:
    client, password, _ = bmc
    node = node_dir
    auth = basic("admin", password)
    status, headers, body = client.request("POST", RESET, {"ResetType": "ForceRestart"}, headers=auth)
    assert (status, body) == (204, None) and headers["OData-Version"] == "4.0"
    assert (node / "reboot.request").read_text() == "ForceRestart"
    # a session's token authorises it as basic auth does
    sessions = f"{resources.ROOT}/SessionService/Sessions"
    _, login, _ = client.request("POST", sessions, {"UserName": "admin", "Password": password})
    token = {"X-Auth-Token": login["X-Auth-Token"]}
    assert client.request("POST", RESET, {"ResetType": "GracefulShutdown"}, headers=token)[0] == 204
    assert (node / "reboot.request").read_text() == "GracefulShutdown"


def test_a_reset_needs_credentials(bmc: tuple[Client, str, Any], node_dir: Path) -> None:
    client, _, _ = bmc
    node = node_dir
    status, _, body = client.request("POST", RESET, {"ResetType": "ForceOff"})
    assert status == 401 and body["error"]["code"] == "Base.1.18.NoValidSession"
    status, _, _ = client.request("POST", RESET, {"ResetType": "ForceOff"}, headers=basic("admin", "wrong"))
    assert status == 401
    assert not (node / "reboot.request").exists()


@pytest.mark.parametrize(
    ("sent", "message_id", "args"),
    [
        ({}, "ActionParameterMissing", ["ComputerSystem.Reset", "ResetType"]),
        (
            {"ResetType": "Reboot"},
            "ActionParameterValueNotInList",
            ["Reboot", "ResetType", ACTION],
        ),
        ({"ResetType": "Nmi"}, "ActionParameterValueNotInList", ["Nmi", "ResetType", "ComputerSystem.Reset"]),
        ({"ResetType": 1}, "ActionParameterValueTypeError", ["1", "ResetType", "ComputerSystem.Reset"]),
        (
            {"ResetType": "On", "Delay": 5},
            "ActionParameterNotSupported",
            ["Delay", "ComputerSystem.Reset"],
        ),
        (["ForceOff"], "MalformedJSON", []),
    ],
)
def test_a_bad_reset_is_400_with_the_base_message(
    bmc: tuple[Client, str, Any], node_dir: Path, sent: Any, message_id: str, args: list[str]
) -> None:
    client, password, _ = bmc
    node = node_dir
    status, _, body = client.request("POST", RESET, sent, headers=basic("admin", password))
    assert status == 400, body
    info = body["error"]["@Message.ExtendedInfo"][0]
    assert (info["MessageId"], info["MessageArgs"]) == (f"Base.1.18.{message_id}", args)
    if message_id == "ActionParameterValueNotInList":
        assert info["Message"] == (
            f"The value '{args[0]}' for the parameter ResetType in the action ComputerSystem.Reset is not in "
            "the list of acceptable values."
        )
        assert body["error"]["message"].endswith(f"Allowed values: {', '.join(ALLOWED)}.")
    assert not (node / "reboot.request").exists()


def test_a_malformed_body_is_400(bmc: tuple[Client, str, Any]) -> None:
    client, password, _ = bmc
    status, _, raw = client.raw("POST", RESET, b"{ResetType", headers=basic("admin", password))
    assert status == 400 and json.loads(raw)["error"]["code"] == "Base.1.18.MalformedJSON"


def test_the_action_target_takes_only_post(bmc: tuple[Client, str, Any]) -> None:
    client, password, _ = bmc
    auth = basic("admin", password)
    status, headers, body = client.request("GET", RESET, headers=auth)
    assert status == 405 and headers["Allow"] == "POST"
    assert body["error"]["code"] == "Base.1.18.OperationNotAllowed"
    status, headers, _ = client.request("PATCH", resources.SYSTEM, {"AssetTag": "x"}, headers=auth)
    assert status == 405 and headers["Allow"] == "GET, HEAD"
