"""The gpufleet.node.switch_qos action plugin's SONiC leaf, its connection stubbed: the one command it runs,
the reading and drift it returns in check mode, its refusal to change a SONiC leaf, a leaf that fails to
answer (command error, timeout, SSH) read as unread, and the input errors (the OS setting, a local
connection). tests/integration/test_sonic_leaf.py runs it over real SSH against a simulated leaf."""

from __future__ import annotations

import json
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from ansible.errors import AnsibleConnectionFailure
from ansible_collections.gpufleet.node.plugins.action.switch_qos import ActionModule

from tests.unit.mutations import FIXTURES

PORT_QOS = (FIXTURES / "sonic" / "sonic-utilities-config_db-PORT_QOS_MAP.json").read_text(encoding="utf-8")
Answer = Callable[[str], dict[str, Any]]


def _action(
    answer: Answer, check_mode: bool, transport: str = "ssh", **args: Any
) -> tuple[ActionModule, list[str]]:
    ran: list[str] = []

    def execute(command: str) -> dict[str, Any]:
        ran.append(command)
        return answer(command)

    action = ActionModule.__new__(ActionModule)
    action._task = SimpleNamespace(args={"os": "sonic", "name": "leaf07", **args}, check_mode=check_mode)
    action._connection = SimpleNamespace(transport=transport)
    action._low_level_execute_command = execute  # type: ignore[method-assign]
    return action, ran


def _printed(text: str) -> Answer:
    return lambda _command: {"rc": 0, "stdout": text, "stderr": ""}


def _run(action: ActionModule) -> dict[str, Any]:
    result: dict[str, Any] = action._sonic({}, {"inventory_hostname": "leaf07"})
    return result


def test_check_mode_reads_once_and_reports_the_drift() -> None:
    action, ran = _action(_printed(PORT_QOS), check_mode=True)
    result = _run(action)
    assert ran == ["timeout 10 sonic-cfggen -d --print-data"]
    assert not result.get("failed") and result["changed"] is True
    assert result["reading"]["read"] and sorted(result["reading"]["port_qos"]) == ["Ethernet92", "Ethernet96"]
    assert {"setting": "PORT_QOS_MAP|Ethernet92 pfc_enable", "from": "", "to": "3"} in result["changes"]
    assert [c["name"] for c in result["checks"]] == ["switch.sonic[leaf07]"]
    assert result["hints"] == []  # a read says nothing of changes


def test_a_run_that_would_change_a_sonic_leaf_is_refused() -> None:
    action, ran = _action(_printed(PORT_QOS), check_mode=False)
    result = _run(action)
    assert len(ran) == 1  # read only: nothing else is run on the leaf
    assert result["failed"] and result["changed"] is False
    assert result["msg"].startswith("leaf07 runs SONiC (gpufleet_switch_os: sonic), which gpufleet reads and")
    assert (
        "it differs from the lossless RoCE profile in 14 setting(s) (DSCP_TO_TC_MAP|AZURE 26,"
        in result["msg"]
    )
    assert {"setting": "PORT_QOS_MAP|Ethernet92 pfc_enable", "from": "", "to": "3"} in result["changes"]


def test_a_sonic_leaf_with_nothing_to_change_passes_a_run() -> None:
    good = {
        "DSCP_TO_TC_MAP": {"ROCE": {"26": "3", "48": "6"}},
        "TC_TO_QUEUE_MAP": {"ROCE": {"3": "3", "6": "6"}},
        "WRED_PROFILE": {"LOSSLESS": {"ecn": "ecn_all"}},
        "PORT": {"Ethernet0": {"alias": "swp1", "mtu": "9216"}},
        "PORT_QOS_MAP": {
            "Ethernet0": {"dscp_to_tc_map": "ROCE", "tc_to_queue_map": "ROCE", "pfc_enable": "3"}
        },
        "QUEUE": {"Ethernet0|3": {"wred_profile": "LOSSLESS"}},
    }
    action, _ran = _action(_printed(json.dumps(good)), check_mode=False)
    result = _run(action)
    assert not result.get("failed") and result["changed"] is False and result["changes"] == [], result
    assert result["hints"] == ["leaf07 runs SONiC: read only, gpufleet never changes it"]
    assert result["reading"]["mtu"] == {"Ethernet0": 9216, "swp1": 9216}


def test_a_leaf_that_does_not_answer_is_unread_not_a_crash() -> None:
    answers: dict[str, Answer] = {
        "exited 1: Redis connection refused": lambda _c: {
            "rc": 1,
            "stdout": "",
            "stderr": "Redis connection refused",
        },
        "did not answer within 4 s (timeout)": lambda _c: {"rc": 124, "stdout": "", "stderr": ""},
        "SSH to the leaf failed: Connection refused": _refused,
        "printed what gpufleet cannot read": _printed("{not json"),
    }
    for said, answer in answers.items():
        action, _ran = _action(answer, check_mode=True, timeout=4)
        result = _run(action)
        assert not result.get("failed"), said  # check mode: the nodes name the unread leaf
        assert result["reading"]["read"] is False and said in result["reading"]["error"], result
        (read,) = result["checks"]
        assert read["name"] == "switch.sonic[leaf07]" and not read["ok"]
        action, _ran = _action(answer, check_mode=False, timeout=4)
        assert _run(action)["failed"], said


def _refused(_command: str) -> dict[str, Any]:
    raise AnsibleConnectionFailure("Connection refused")


def test_input_errors_name_the_setting() -> None:
    action, ran = _action(_printed(PORT_QOS), check_mode=True, transport="local")
    result = _run(action)
    assert result["failed"] and result["input_error"] and ran == []
    assert result["msg"].startswith(
        "Refusing to read the switch: leaf07 runs SONiC (gpufleet_switch_os: sonic) and is read over SSH"
    )
    assert "ansible_connection: ssh" in result["msg"]
    action, ran = _action(_printed(PORT_QOS), check_mode=True, ports=["Ethernet1"])
    result = _run(action)
    assert result["failed"] and result["input_error"]
    assert result["msg"].startswith(
        "Refusing to read the switch: ports (switch_qos_ports) names Ethernet1, which leaf07 does not have"
    )


def test_an_os_gpufleet_does_not_read_is_refused_naming_the_setting() -> None:
    """Any other os goes the Cumulus way (the module's check mode, in the action) and is refused there."""
    action, ran = _action(_printed(PORT_QOS), check_mode=True, transport="local", os="junos")
    result = action._read_cumulus({})
    assert result["failed"] and result["input_error"] and ran == []
    assert result["msg"] == (
        "Refusing to read or change the switch: os (gpufleet_switch_os) is 'junos'; allowed: cumulus, sonic "
        "(cumulus: read and configured over NVUE's REST API; sonic: read over SSH with sonic-cfggen -d "
        "--print-data, never changed)."
    )
