"""gpufleet.node.switch_qos against the simulated leaf (sim/nvue.py): a port the leaf lacks is an input
error before any revision; a failed or interrupted change leaves no pending revision and names it; the
action plugin's check-mode read in the worker returns what the module's check mode does."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ansible.module_utils.urls import open_url
from ansible_collections.gpufleet.node.plugins.action.switch_qos import ActionModule
from ansible_collections.gpufleet.node.plugins.module_utils.fabric import switch_qos as role
from ansible_collections.gpufleet.node.plugins.module_utils.mgmt import nvue_client
from ansible_collections.gpufleet.node.plugins.modules import switch_qos
from gpufleet_sim import faults_switch, nvue, nvue_state

from tests.unit.modules.harness import run_module


class Leaf:
    def __init__(self, directory: Path) -> None:
        self.password = nvue.prepare(directory, "leaf01", "127.0.0.1", ports=8)
        self.state = nvue.state_file(directory, "leaf01")
        self.ca = directory / "ca.pem"
        context = nvue.context_for(directory / "leaf01.pem", directory / "leaf01-key.pem")
        self.listener = nvue.Listener(self.state, ("127.0.0.1", 0), context).start()

    def args(self, **extra: Any) -> dict[str, Any]:
        address = f"127.0.0.1:{self.listener.port}"
        base = {"name": "leaf01", "address": address, "username": "cumulus", "password": self.password}
        return {**base, "ca_path": str(self.ca), **extra}

    def revisions(self) -> dict[str, Any]:
        revisions: dict[str, Any] = nvue_state.load(self.state)["revisions"]
        return revisions


@pytest.fixture
def leaf(tmp_path: Path) -> Iterator[Leaf]:
    nvue_client._CLIENTS.clear()
    switch = Leaf(tmp_path / "switches")
    with nvue_state.locked(switch.state) as current:  # drift to fix: PFC off
        faults_switch.LEAF_FAULTS["switch-pfc-off"][0](current)
    try:
        yield switch
    finally:
        switch.listener.stop()
        nvue_client._CLIENTS.clear()


@pytest.mark.parametrize("check_mode", [True, False])
def test_a_port_the_leaf_does_not_have_is_an_input_error_before_any_revision(
    leaf: Leaf, check_mode: bool
) -> None:
    run = run_module(switch_qos.main, leaf.args(ports=["swp1", "swp999"]), check_mode=check_mode)
    assert run.result["failed"] and run.result["input_error"] is True
    assert run.result["msg"].startswith("ports (switch_qos_ports) names swp999, which leaf01 does not have")
    assert "its 8 front-panel ports are swp1, swp2, swp3, swp4 ... swp8" in run.result["msg"]
    assert leaf.revisions() == {}


def test_a_patch_the_leaf_fails_leaves_no_revision_and_names_it(leaf: Leaf) -> None:
    faults_switch.inject_leaf(leaf.state, "switch-patch-500")
    run = run_module(switch_qos.main, leaf.args())
    assert run.result["failed"] and "HTTP 500" in run.result["msg"]
    assert run.result["revision"] and run.result["revision_state"] == "deleted"
    assert leaf.revisions() == {}


class Signalling:
    """open_url, sending this process ``signum`` (as gpufleet's stop of a canceled run does) instead
    of the first request whose method and path match (that one is never sent)."""

    def __init__(self, signum: int, method: str, fragment: str) -> None:
        self.signum, self.method, self.fragment, self.sent = signum, method, fragment, False

    def __call__(self, url: str, **kwargs: Any) -> Any:
        if not self.sent and kwargs.get("method") == self.method and self.fragment in url:
            self.sent = True
            os.kill(os.getpid(), self.signum)
            raise ConnectionResetError("the request was cut short by the signal")
        return open_url(url, **kwargs)


@pytest.mark.parametrize(
    ("signum", "method", "delay", "state"),
    [
        (signal.SIGTERM, "PATCH", 0.0, "deleted"),  # before the apply request: nothing applied
        (signal.SIGINT, "GET", 3600.0, "apply"),  # the apply under way outlasts the wait: named
        (signal.SIGTERM, "GET", 0.3, "applied"),  # the apply ends within the wait
    ],
)
def test_a_signal_during_the_change_settles_the_revision_and_names_it(
    leaf: Leaf, monkeypatch: pytest.MonkeyPatch, signum: int, method: str, delay: float, state: str
) -> None:
    monkeypatch.setattr(nvue_client, "INTERRUPT_WAIT_S", 1.0)
    opener = Signalling(signum, method, "/revision/")
    monkeypatch.setattr(role, "client_for", lambda *a, **kw: nvue_client.NvueClient(*a, opener=opener, **kw))
    with nvue_state.locked(leaf.state) as current:
        current["apply-delay-s"] = delay
    before = signal.getsignal(signal.SIGTERM)
    run = run_module(switch_qos.main, leaf.args())
    assert signal.getsignal(signal.SIGTERM) is before  # the module's handlers are gone again
    name = signal.Signals(signum).name
    assert run.result["failed"] and f"{name} while changing it" in run.result["msg"], run.result
    assert run.result["revision_state"] == state
    rev = run.result["revision"]
    assert rev in run.result["msg"]
    assert {r: v["state"] for r, v in leaf.revisions().items()} == (
        {} if state == "deleted" else {rev: state}
    )


def _read_in_the_worker(args: dict[str, Any], diff: bool = False) -> dict[str, Any]:
    """The action plugin's check-mode read of a Cumulus leaf (drift, check, the gate): the module's code
    in the worker, its connection local."""
    action = ActionModule.__new__(ActionModule)
    action._task = SimpleNamespace(args=args, check_mode=True, diff=diff)
    action._connection = SimpleNamespace(transport="local")
    result: dict[str, Any] = action._read_cumulus({})
    return result


@pytest.mark.parametrize("ports", [[], ["swp1", "swp999"]])
def test_the_action_reads_a_cumulus_leaf_as_the_module_does_in_check_mode(
    leaf: Leaf, ports: list[str]
) -> None:
    by_module = run_module(switch_qos.main, leaf.args(ports=ports), check_mode=True, diff=True).result
    by_action = _read_in_the_worker(leaf.args(ports=ports), diff=True)
    assert by_action == by_module
    assert leaf.revisions() == {}  # read only, both ways
    if not ports:
        assert by_action["changed"] and by_action["reading"]["read"]
        assert [c["name"] for c in by_action["checks"]] == ["switch.nvue[leaf01]"]
        assert by_action["changes"] == [
            {"setting": "qos/pfc/default-global/switch-priority/3", "from": None, "to": "present"}
        ]


def test_the_action_reads_no_password_into_its_result(leaf: Leaf) -> None:
    unread = _read_in_the_worker(leaf.args(password=f"{leaf.password}-wrong"))
    assert unread["reading"]["read"] is False and unread["checks"][0]["ok"] is False
    assert leaf.password not in str(unread)


def test_the_action_refuses_bad_inputs_as_the_module_does(leaf: Leaf) -> None:
    args = leaf.args(roce_dscp=99)
    by_module = run_module(switch_qos.main, args, check_mode=True).result
    assert _read_in_the_worker(args) == by_module
    assert by_module["input_error"] is True and "roce_dscp" in by_module["msg"]


def test_a_leaf_that_cannot_be_read_fails_a_change_with_what_was_read(leaf: Leaf) -> None:
    """Check mode reads an unreachable leaf as unread (the nodes name it); a run to change it fails with
    the reading's error and the whole result, nothing applied."""
    args = leaf.args(address="127.0.0.1:1", timeout=2)
    checked = run_module(switch_qos.main, args, check_mode=True).result
    assert not checked.get("failed") and checked["reading"]["read"] is False
    run = run_module(switch_qos.main, args).result
    assert run["failed"] and run["msg"] == checked["reading"]["error"]
    assert {k: v for k, v in run.items() if k not in ("failed", "msg")} == checked
    assert run["revision"] is None and run["changes"] == [] and not run["checks"][0]["ok"]
