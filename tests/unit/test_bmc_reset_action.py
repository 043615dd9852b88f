"""gpufleet.node.bmc_reset against the simulator's BMC started in-process (its real ComputerSystem.Reset over
TLS, node_power's rules): GracefulRestart taken by a node that answers, ForceRestart after the graceful
timeout on a hung node (node-hung), each reset with its times; the BMC refusing; a host that never goes
down; the action plugin's check mode (nothing sent), its refusal when delegated, and its whole run with the
node's SSH a banner server that goes away while the node reboots and Ansible's wait stubbed."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.action.bmc_reset import ActionModule
from ansible_collections.gpufleet.node.plugins.module_utils.mgmt import bmc_reset
from ansible_collections.gpufleet.node.plugins.module_utils.mgmt.redfish_client import RedfishError
from gpufleet_sim import faults, node_power, state
from gpufleet_sim.bmc import launch, server

from tests.unit.sim.fake_node import node_state_dir


class Banner:
    """The node's sshd as a banner: a TCP server on 127.0.0.1 that says 'SSH-2.0-...' while up."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.up = True
        self.stopping = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopping:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                if self.up:
                    conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")
                # down: accepted and closed at once, nothing said (a host going down, or hung)

    def close(self) -> None:
        self.stopping = True
        self.thread.join()
        self.sock.close()


class Host:
    """What the node's Fleet does with its BMC's requests (node_power.plan): a reboot takes SSH away for a
    moment and records the reset (PowerState PoweringOn, LastResetTime), then brings it back."""

    def __init__(self, node_dir: Path, banner: Banner, reboot_s: float = 0.4) -> None:
        self.node_dir, self.banner, self.reboot_s = node_dir, banner, reboot_s
        self.done: list[tuple[str, str]] = []
        self.stopping = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        request = self.node_dir / node_power.REBOOT_REQUEST
        while not self.stopping:
            time.sleep(0.02)
            if not request.exists():
                continue
            asked = request.read_text(encoding="utf-8").strip()
            request.unlink()
            current = state.load(self.node_dir)
            what, _why = node_power.plan(asked, node_power.power_state(current), node_power.answers(current))
            self.done.append((asked, what))
            if what != node_power.REBOOT:
                continue
            self.banner.up = False
            with state.locked(self.node_dir) as current:
                node_power.powered_down(current, node_power.POWERING_ON)
            time.sleep(self.reboot_s)
            with state.locked(self.node_dir) as current:
                current["power_state"] = node_power.ON
            self.banner.up = True

    def close(self) -> None:
        self.stopping = True
        self.thread.join()


@pytest.fixture
def bmc(tmp_path: Path) -> Iterator[tuple[dict[str, Any], Path, Banner]]:
    node_dir = node_state_dir(tmp_path, 1)
    bmc_dir = tmp_path / "bmc"
    password = launch.prepare(bmc_dir, "node01", "127.0.0.1", node_dir)
    banner = Banner()
    with server.in_process(node_dir, bmc_dir, "node01") as listener:
        assert listener.server is not None
        params = {
            "baseuri": f"https://127.0.0.1:{listener.server.server_address[1]}",
            "username": launch.USERNAME,
            "password": password,
            "auth": "session",
            "validate_certs": True,
            "ca_path": str(bmc_dir / "ca.pem"),
            "insecure_http_reason": None,
            "timeout": 10,
            "retries": 0,
            "retry_delay": 0.0,
            "use_proxy": False,
            "graceful_timeout_s": 2,
            "boot_timeout_s": 5,
            "poll_interval_s": 0.05,
            "ssh_host": "127.0.0.1",
            "ssh_port": banner.port,
        }
        try:
            yield params, node_dir, banner
        finally:
            banner.close()


def run_reboot(params: dict[str, Any], banner: Banner) -> bmc_reset.Reboot:
    client = bmc_reset.client_for(params)

    def down() -> bool:
        return not bmc_reset.ssh_answers("127.0.0.1", banner.port, 1.0)

    reboot = bmc_reset.Reboot(client, down, params)
    with client:
        reboot.run()
    return reboot


def test_ssh_answers_is_the_banner(bmc: tuple[dict[str, Any], Path, Banner]) -> None:
    _, _, banner = bmc
    assert bmc_reset.ssh_answers("127.0.0.1", banner.port, 1.0)
    banner.up = False
    assert not bmc_reset.ssh_answers("127.0.0.1", banner.port, 1.0)  # accepted, nothing said
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    assert not bmc_reset.ssh_answers("127.0.0.1", port, 1.0)  # refused


def test_a_node_that_answers_takes_the_graceful_restart(bmc: tuple[dict[str, Any], Path, Banner]) -> None:
    params, node_dir, banner = bmc
    host = Host(node_dir, banner)
    try:
        reboot = run_reboot(params, banner)
    finally:
        host.close()
    assert host.done == [("GracefulRestart", node_power.REBOOT)]
    assert [r["reset_type"] for r in reboot.resets] == ["GracefulRestart"]
    assert reboot.resets[0]["went_down"] and reboot.resets[0]["went_down"] >= reboot.resets[0]["sent"]
    assert reboot.down_at == reboot.resets[0]["went_down"]
    assert reboot.system == "/redfish/v1/Systems/system"


def test_a_hung_node_gets_the_forced_restart_after_the_graceful_timeout(
    bmc: tuple[dict[str, Any], Path, Banner],
) -> None:
    params, node_dir, banner = bmc
    assert faults.inject(node_dir, node_power.HUNG)
    banner.up = False  # a hung node accepts the connection and says nothing
    host = Host(node_dir, banner)
    started = time.monotonic()
    try:
        reboot = run_reboot(params, banner)
    finally:
        host.close()
    assert time.monotonic() - started >= params["graceful_timeout_s"]
    assert host.done == [("GracefulRestart", node_power.IGNORE), ("ForceRestart", node_power.REBOOT)]
    assert [(r["reset_type"], bool(r["went_down"])) for r in reboot.resets] == [
        ("GracefulRestart", False),
        ("ForceRestart", True),
    ]
    assert node_power.HUNG not in state.load(node_dir)["faults"]  # the power cycle ended the hang


def test_a_host_that_never_goes_down_fails_naming_the_forced_restart(
    bmc: tuple[dict[str, Any], Path, Banner],
) -> None:
    params, _, banner = bmc  # no Host: the BMC accepts every reset and nothing happens
    params = dict(params, graceful_timeout_s=1, boot_timeout_s=1)
    with pytest.raises(bmc_reset.Failed, match=r"still answered 1s after ForceRestart .*PowerState On"):
        run_reboot(params, banner)


def test_the_bmc_refusing_the_credentials_stops_before_any_reset(
    bmc: tuple[dict[str, Any], Path, Banner],
) -> None:
    params, node_dir, banner = bmc
    with pytest.raises(RedfishError, match="rejected the credentials"):
        run_reboot(dict(params, password="wrong-password"), banner)
    assert not (node_dir / node_power.REBOOT_REQUEST).exists()


def test_a_reset_type_the_bmc_does_not_offer_is_refused_before_it_is_sent() -> None:
    reboot = bmc_reset.Reboot(SimpleNamespace(baseuri="https://bmc"), lambda: False, {})
    reboot.allowed, reboot.system = ["On", "ForceOff"], "/redfish/v1/Systems/1"
    with pytest.raises(
        bmc_reset.Failed, match=r"does not offer ResetType ForceRestart .*offers: On, ForceOff"
    ):
        reboot._send("ForceRestart")
    assert reboot.resets == []


# -- the action plugin --------------------------------------------------------------------------
def action(args: dict[str, Any], check_mode: bool = False, delegate_to: str | None = None) -> ActionModule:
    plugin = ActionModule.__new__(ActionModule)
    plugin._task = SimpleNamespace(args=args, check_mode=check_mode, delegate_to=delegate_to)
    plugin._connection = SimpleNamespace(transport="ssh")
    plugin._play_context = SimpleNamespace(remote_addr="127.0.0.1", port=None)
    plugin._vars = {}
    return plugin


def work(plugin: ActionModule, args: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    plugin.work(args, result)
    return result


def test_check_mode_sends_nothing(bmc: tuple[dict[str, Any], Path, Banner]) -> None:
    params, node_dir, _ = bmc
    result = work(action(params, check_mode=True), params)
    assert result["changed"] is True and result["resets"] == [] and result["requests"] == 0
    assert result["msg"].startswith("would send GracefulRestart through BMC https://127.0.0.1:")
    assert "nothing sent" in result["msg"] and not (node_dir / node_power.REBOOT_REQUEST).exists()


def test_a_delegated_task_and_bad_timeouts_are_refused_before_anything_is_sent(
    bmc: tuple[dict[str, Any], Path, Banner],
) -> None:
    params, node_dir, _ = bmc
    bad = dict(params, graceful_timeout_s=0)
    result = work(action(bad, delegate_to="localhost"), bad)
    assert result["failed"] is True and result["input_error"] is True
    assert result["msg"].startswith("graceful_timeout_s must be 1 to 3600 s, got 0; bmc_reset runs for the")
    assert not (node_dir / node_power.REBOOT_REQUEST).exists()


def test_the_whole_run_reboots_waits_and_masks_the_password(bmc: tuple[dict[str, Any], Path, Banner]) -> None:
    params, node_dir, banner = bmc
    plugin = action(params)
    waited: list[int] = []

    def wait_up(timeout: int) -> dict[str, Any]:
        waited.append(timeout)
        return {"elapsed": 2}

    plugin._wait_up = wait_up  # type: ignore[method-assign]
    host = Host(node_dir, banner)
    try:
        result = work(plugin, params)
    finally:
        host.close()
    assert not result.get("failed"), result
    assert result["changed"] is True and result["step"] == "reboot" and waited == [5]
    assert [r["reset_type"] for r in result["resets"]] == ["GracefulRestart"]
    assert result["msg"].startswith("rebooted through BMC https://127.0.0.1:")
    assert "GracefulRestart sent " in result["msg"] and result["msg"].endswith("answered again after 2s")
    assert result["started"] <= result["down_at"] <= result["up_at"] <= result["ended"]
    assert params["password"] not in str(result)


def test_a_node_that_does_not_come_back_fails_naming_the_wait(
    bmc: tuple[dict[str, Any], Path, Banner],
) -> None:
    params, node_dir, banner = bmc
    plugin = action(params)
    failed = {
        "failed": True,
        "msg": "timed out waiting for ping module test: Failed to connect to the host via ssh",
    }
    plugin._wait_up = lambda timeout: failed  # type: ignore[method-assign]
    host = Host(node_dir, banner)
    try:
        result = work(plugin, params)
    finally:
        host.close()
    assert result["failed"] is True and result["changed"] is True
    assert result["msg"] == (
        "reboot stopped waiting for the node to answer: not back within 5s after GracefulRestart (timed out "
        "waiting for ping module test: Failed to connect to the host via ssh)"
    )


def test_the_bmc_refusing_fails_naming_the_step(bmc: tuple[dict[str, Any], Path, Banner]) -> None:
    params, _, _ = bmc
    bad = dict(params, password="wrong-password")
    result = work(action(bad), bad)
    assert result["failed"] is True and result["changed"] is False
    assert result["msg"].startswith(
        "reboot stopped at finding the host's reset action: BMC https://127.0.0.1:"
    )
    assert "wrong-password" not in str(result)
