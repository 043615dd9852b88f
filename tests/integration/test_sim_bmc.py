"""Each simulated node's BMC: HTTPS Redfish on the node's address, vaulted credentials in the
inventory, live readings, faults, a BMC that stays up while its host reboots, and the host's
ComputerSystem.Reset carried out by the test's own fleet (its request thread)."""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from gpufleet_sim import faults, node_power, state
from gpufleet_sim.bmc import vault
from gpufleet_sim.fleet import Fleet

from tests.integration.conftest import node_ssh

SUBNET = "127.0.31"
ADDRESS = {"node01": f"{SUBNET}.2", "node02": f"{SUBNET}.3"}
CONNECTOR = "/redfish/v1/Chassis/1/ThermalSubsystem/CoolantConnectors/Baseboard1"
SYSTEM = "/redfish/v1/Systems/system"
RESET = f"{SYSTEM}/Actions/ComputerSystem.Reset"
POWER_LIMIT = "nvidia-smi --query-gpu=power.limit --format=csv,noheader,nounits"


@pytest.fixture(scope="module")
def fleet(fleet_factory: Any) -> Fleet:
    started: Fleet = fleet_factory(nodes=2, subnet=SUBNET)
    return started


def inventory(fleet: Fleet) -> dict[str, Any]:
    data: dict[str, Any] = yaml.load(fleet.inventory_path.read_text(), Loader=vault.InventoryLoader)
    return data["all"]["children"]["gpu_nodes"]


def get(fleet: Fleet, node: str, path: str, auth: tuple[str, str] | None = None) -> tuple[int, Any]:
    return request(fleet, node, "GET", path, auth)


def request(
    fleet: Fleet, node: str, method: str, path: str, auth: tuple[str, str] | None = None, body: Any = None
) -> tuple[int, Any]:
    """(status, the JSON body or None) of one request to a node's BMC, its certificate verified."""
    context = ssl.create_default_context(cafile=inventory(fleet)["vars"]["gpufleet_bmc_ca_path"])
    conn = http.client.HTTPSConnection(ADDRESS[node], 443, context=context, timeout=5)
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if auth:
        headers["Authorization"] = "Basic " + base64.b64encode(":".join(auth).encode()).decode()
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        conn.close()


def ssh(fleet: Fleet, node: str, command: str) -> str:
    return node_ssh(fleet, ADDRESS[node], command, timeout=30).stdout


def eventually(check: Any, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the BMC did not follow its node state"
        time.sleep(0.05)


def refused(fleet: Fleet, node: str) -> bool:
    try:
        get(fleet, node, "/redfish/v1/")
    except ConnectionRefusedError:
        return True
    except (http.client.RemoteDisconnected, ConnectionResetError, ssl.SSLError):
        pass  # going down: the listener still accepts, the service no longer answers
    return False


def test_inventory_names_each_bmc_with_vaulted_credentials(fleet: Fleet) -> None:
    group = inventory(fleet)
    hosts = group["children"]["profile_b300_16"]["hosts"]
    assert hosts["node02"]["gpufleet_bmc_address"] == f"https://{ADDRESS['node02']}"
    assert hosts["node02"]["gpufleet_bmc_username"] == "admin"
    assert isinstance(hosts["node02"]["gpufleet_bmc_password"], vault.Vaulted)
    assert Path(group["vars"]["gpufleet_bmc_ca_path"]) == fleet.bmc_dir / "ca.pem"
    user, password = fleet.bmc_credentials("node02")
    assert password not in fleet.inventory_path.read_text()
    assert password not in json.dumps(state.load(fleet.root / "nodes" / "node02"))
    # Ansible itself decrypts it with the fleet's vault password file
    debug = ["ansible", "localhost", "-i", str(fleet.inventory_path), "-m", "ansible.builtin.debug"]
    debug += ["--vault-password-file", str(fleet.vault_password_file)]
    debug += ["-a", "msg={{ hostvars['node02'].gpufleet_bmc_password }}"]
    done = subprocess.run(debug, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and password in done.stdout
    assert get(fleet, "node02", "/redfish/v1/Chassis", (user, password))[0] == 200


def test_redfish_over_verified_tls_on_the_nodes_own_address(fleet: Fleet) -> None:
    status, root = get(fleet, "node01", "/redfish/v1/")
    assert status == 200 and root["Chassis"] == {"@odata.id": "/redfish/v1/Chassis"}
    status, body = get(fleet, "node01", CONNECTOR)
    assert status == 401 and body["error"]["code"] == "Base.1.18.NoValidSession"
    # node01's credentials do not open node02's BMC
    assert get(fleet, "node02", CONNECTOR, fleet.bmc_credentials("node01"))[0] == 401
    status, connector = get(fleet, "node01", CONNECTOR, fleet.bmc_credentials("node01"))
    assert status == 200 and connector["FlowLitersPerMinute"]["Reading"] == pytest.approx(19.2)
    assert connector["Status"]["Health"] == "OK"


def test_readings_follow_faults_and_the_gpus(fleet: Fleet) -> None:
    node_dir, auth = fleet.root / "nodes" / "node01", fleet.bmc_credentials("node01")
    faults.inject(node_dir, "low-coolant-flow")
    faults.inject(node_dir, "hot-gpu")
    try:
        connector = get(fleet, "node01", CONNECTOR, auth)[1]
        assert connector["FlowLitersPerMinute"]["Reading"] == pytest.approx(4.8)
        assert connector["Status"]["Health"] == "Critical"
        metrics = get(fleet, "node01", "/redfish/v1/Chassis/1/ThermalSubsystem/ThermalMetrics", auth)[1]
        bmc_view = {r["DeviceName"]: r["Reading"] for r in metrics["TemperatureReadingsCelsius"]}
        hot = next(g for g in state.load(node_dir)["gpus"] if g["slot"] == 5)
        query = f"nvidia-smi -i {hot['uuid']} --query-gpu=temperature.gpu --format=csv,noheader"
        assert int(ssh(fleet, "node01", query)) == bmc_view["GPU5"] >= 84
    finally:
        faults.clear(node_dir)


def test_bmc_faults(fleet: Fleet) -> None:
    node_dir, auth = fleet.root / "nodes" / "node02", fleet.bmc_credentials("node02")
    faults.inject(node_dir, "bmc-bad-credentials")
    eventually(lambda: get(fleet, "node02", CONNECTOR, auth)[0] == 401)
    faults.clear(node_dir, "bmc-bad-credentials")
    assert get(fleet, "node02", CONNECTOR, auth)[0] == 200
    faults.inject(node_dir, "bmc-down")
    eventually(lambda: refused(fleet, "node02"))
    assert get(fleet, "node01", "/redfish/v1/")[0] == 200  # the other node's BMC is unaffected
    faults.clear(node_dir, "bmc-down")
    eventually(lambda: not refused(fleet, "node02"))
    assert get(fleet, "node02", CONNECTOR, auth)[0] == 200


def test_the_bmc_answers_while_its_host_reboots(fleet: Fleet) -> None:
    pid = fleet.bmcs["node01"].pid
    answers: list[int] = []
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            answers.append(get(fleet, "node01", "/redfish/v1/")[0])
            time.sleep(0.05)

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        fleet.reboot("node01")
    finally:
        done.set()
        poller.join()
    assert answers and set(answers) == {200}
    assert fleet.bmcs["node01"].pid == pid and fleet.bmcs["node01"].poll() is None


def coolant_facts(fleet: Fleet, node: str, **args: str) -> tuple[int, dict[str, Any], float]:
    """gpufleet.node.coolant_facts on the controller against a node's BMC: (rc, result, seconds)."""
    user, password = fleet.bmc_credentials(node)
    options = {"baseuri": f"https://{ADDRESS[node]}", "username": user, "password": password, **args}
    command = ["ansible", "localhost", "-m", "gpufleet.node.coolant_facts", "-a", json.dumps(options)]
    started = time.monotonic()
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "ANSIBLE_CALLBACK_RESULT_FORMAT": "json", "ANSIBLE_NOCOLOR": "1"},
    )
    took = time.monotonic() - started
    result = json.loads(done.stdout[done.stdout.index("=> ") + 3 :])
    assert password not in done.stdout
    return done.returncode, result, took


def test_coolant_facts_fails_closed_on_the_transport(fleet: Fleet, tmp_path: Path) -> None:
    """Issue 11: no password over plain HTTP without a reason; a bad CA file is named at once."""
    ca = inventory(fleet)["vars"]["gpufleet_bmc_ca_path"]
    rc, result, _ = coolant_facts(fleet, "node01", ca_path=ca)
    assert rc == 0, result
    assert result["ansible_facts"]["gpufleet_coolant"]["connectors"][0]["flow_lpm"] == pytest.approx(19.2)
    assert result["hints"] == []

    garbage = tmp_path / "bmc-ca.pem"
    garbage.write_text("not a certificate\n")
    for bad, said in ((garbage, "holds no PEM certificate"), (tmp_path / "none.pem", "does not exist")):
        rc, result, took = coolant_facts(fleet, "node01", ca_path=str(bad), retry_delay="5")
        assert rc != 0 and result["checks"][0]["value"] == "config", result
        assert f"CA file {bad} {said}" in result["msg"] and "thermal_gate_bmc_ca_path" in result["msg"]
        assert result["requests"] == 0 and took < 30  # no retries (3 of them would wait 5 + 10 + 20 s)

    rc, result, _ = coolant_facts(fleet, "node01", baseuri=f"http://{ADDRESS['node01']}", ca_path=ca)
    assert rc != 0 and result["checks"][0]["value"] == "config" and result["requests"] == 0
    assert "is plain HTTP" in result["msg"] and "thermal_gate_bmc_address" in result["msg"]


# -- the host's reset through Redfish ---------------------------------------------------------------
def reset(fleet: Fleet, node: str, reset_type: str, timeout: float = 60.0) -> str:
    """POSTs ComputerSystem.Reset to the node's BMC (204 at once) and waits for the fleet's answer."""
    answer = fleet.root / "nodes" / node / node_power.REBOOT_ANSWER
    answer.unlink(missing_ok=True)
    status, body = request(fleet, node, "POST", RESET, fleet.bmc_credentials(node), {"ResetType": reset_type})
    assert (status, body) == (204, None)
    eventually(answer.exists, timeout)
    return answer.read_text()


def power_state(fleet: Fleet, node: str) -> str:
    status, system = get(fleet, node, SYSTEM, fleet.bmc_credentials(node))
    assert status == 200
    return str(system["PowerState"])


def test_a_force_restart_through_redfish_reboots_the_node(fleet: Fleet) -> None:
    assert set(ssh(fleet, "node01", f"nvidia-smi -pl 1000 >/dev/null && {POWER_LIMIT}").split()) == {
        "1000.00"
    }
    unshare = fleet.processes["node01"].pid
    assert power_state(fleet, "node01") == "On"
    assert reset(fleet, "node01", "ForceRestart") == "ok"
    # the node went down and came back: a new node process, its volatile power limit back to default
    assert fleet.processes["node01"].pid != unshare
    assert set(ssh(fleet, "node01", POWER_LIMIT).split()) == {"1400.00"}
    assert power_state(fleet, "node01") == "On"


def test_a_hung_node_ignores_a_graceful_restart_and_a_force_restart_brings_it_back(fleet: Fleet) -> None:
    node_dir = fleet.root / "nodes" / "node02"
    assert faults.inject(node_dir, node_power.HUNG)
    try:
        # its sshd accepts the connection but never answers
        with pytest.raises(subprocess.TimeoutExpired):
            node_ssh(fleet, ADDRESS["node02"], "true", timeout=5)
        unshare = fleet.processes["node02"].pid
        answer = reset(fleet, "node02", "GracefulRestart")
        assert answer == "ignored: the OS does not answer (hung, or its sshd is gone)"
        assert fleet.processes["node02"].pid == unshare and power_state(fleet, "node02") == "On"
        assert reset(fleet, "node02", "ForceRestart") == "ok"
        assert fleet.processes["node02"].pid != unshare
        assert ssh(fleet, "node02", "hostname").strip() == "node02"
        assert node_power.HUNG not in state.load(node_dir)["faults"]  # the power cycle ended the hang
    finally:
        if node_power.HUNG in state.load(node_dir)["faults"]:
            faults.clear(node_dir, node_power.HUNG)


def test_force_off_and_on_through_redfish(fleet: Fleet) -> None:
    assert reset(fleet, "node02", "ForceOff") == "ok"
    assert power_state(fleet, "node02") == "Off"
    assert "node02" not in fleet.processes
    done = node_ssh(fleet, ADDRESS["node02"], "true", check=False, timeout=10)
    assert done.returncode == 255 and "Connection refused" in done.stderr
    assert reset(fleet, "node02", "GracefulRestart") == "ignored: off: no OS to ask"
    assert reset(fleet, "node02", "On") == "ok"
    assert power_state(fleet, "node02") == "On"
    assert ssh(fleet, "node02", "hostname").strip() == "node02"


def test_a_bad_reset_type_is_400_naming_the_allowed_values(fleet: Fleet) -> None:
    auth = fleet.bmc_credentials("node01")
    status, body = request(fleet, "node01", "POST", RESET, auth, {"ResetType": "Reboot"})
    assert status == 400
    assert body["error"]["code"] == "Base.1.18.ActionParameterValueNotInList"
    allowed = get(fleet, "node01", SYSTEM, auth)[1]["Actions"]["#ComputerSystem.Reset"][
        "ResetType@Redfish.AllowableValues"
    ]
    assert body["error"]["message"].endswith(f"Allowed values: {', '.join(allowed)}.")
    assert "ForceRestart" in allowed and "GracefulRestart" in allowed
    status, body = request(fleet, "node01", "POST", RESET, auth, {})
    assert status == 400 and body["error"]["code"] == "Base.1.18.ActionParameterMissing"
    assert not (fleet.root / "nodes" / "node01" / node_power.REBOOT_REQUEST).exists()
