"""The thermal gate's phases as one module run each (issue 40): service_check starts every instance and
waits for it in one run (roles/thermal_gate/tasks/start.yml), burn_in judges every instance's prefix
cache after its load and marks the node passed (verify.yml), gate_stop stops the instances and withdraws
the markers (stop.yml). Against FakeVllm on 127.0.0.1 and a node's systemctl answered here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import rdma_read
from ansible_collections.gpufleet.node.plugins.modules import burn_in, gate_stop, service_check

from tests.unit.module_utils.thermal.test_burn_in import FakeVllm
from tests.unit.modules import harness
from tests.unit.modules.test_burn_in_module import Node, fast

SYSTEMCTL = "/usr/bin/systemctl"


class Systemd:
    """systemctl on a node: each unit active or not, installed or not; every call kept."""

    def __init__(self, active: dict[str, bool], start_rc: int = 0) -> None:
        self.active = dict(active)
        self.start_rc = start_rc
        self.calls: list[list[str]] = []

    def __call__(self, module: Any, args: list[str], **kwargs: Any) -> tuple[int, str, str]:
        self.calls.append(list(args))
        verb, unit = args[1], args[-1]
        if unit not in self.active:
            if verb == "show":
                return 0, f"Id={unit}\nLoadState=not-found\nActiveState=inactive\nSubState=dead\n", ""
            return 5, "", f"Failed to {verb} {unit}: Unit {unit} not loaded.\n"
        if verb == "is-active":
            return (0, "active\n", "") if self.active[unit] else (3, "inactive\n", "")
        if verb == "show":
            state = "active" if self.active[unit] else "inactive"
            return 0, f"Id={unit}\nLoadState=loaded\nActiveState={state}\nSubState=running\n", ""
        if verb == "start":
            if self.start_rc:
                return self.start_rc, "", f"Job for {unit} failed.\n"
            self.active[unit] = True
            return 0, "", ""
        if verb == "stop":
            self.active[unit] = False
            return 0, "", ""
        raise AssertionError(args)


@pytest.fixture
def two() -> Iterator[tuple[FakeVllm, FakeVllm]]:
    with FakeVllm() as glm52, FakeVllm(model="Kimi-K3") as kimik3:
        yield glm52, kimik3


def _instances(two: tuple[FakeVllm, FakeVllm]) -> list[dict[str, Any]]:
    # the inference_service role's list as it is: other keys ignored
    return [
        {"name": "glm52", "port": two[0].port, "model": "x", "gpus": [0]},
        {"name": "kimik3", "port": two[1].port},
    ]


def _args(two: tuple[FakeVllm, FakeVllm], **more: Any) -> dict[str, Any]:
    """service_check's arguments for both instances on 127.0.0.1, units vllm-<name>.service; and ``more``."""
    return {"instances": _instances(two), "host": "127.0.0.1", "unit_template": "vllm-{name}.service", **more}


def _start(args: dict[str, Any], systemd: Systemd, check_mode: bool = False) -> dict[str, Any]:
    return harness.run_module(
        service_check.main, args, check_mode, run_command=systemd, get_bin_path=SYSTEMCTL
    ).result


def test_the_start_phase_writes_the_marker_starts_each_unit_and_takes_every_baseline(
    two: tuple[FakeVllm, FakeVllm], tmp_path: Path
) -> None:
    marker = tmp_path / "run" / "gpufleet" / "thermal-gate-passed"
    systemd = Systemd({"vllm-glm52.service": False, "vllm-kimik3.service": True})
    two[0].queries, two[0].hits = 1000.0, 900.0
    args = _args(two, start=True, start_marker=str(marker), wait_timeout=30, check_prefix_cache=False)
    result = _start(args, systemd)
    assert "failed" not in result and result["changed"] is True
    assert marker.read_text() == "thermal gate passed\n" and oct(marker.stat().st_mode & 0o777) == "0o644"
    assert result["started"] == [str(marker), "vllm-glm52.service"]
    assert [SYSTEMCTL, "start", "vllm-glm52.service"] in systemd.calls
    assert [SYSTEMCTL, "start", "vllm-kimik3.service"] not in systemd.calls
    assert [c["name"] for c in result["checks"]] == [
        "service.health[glm52]",
        "service.models[glm52]",
        "service.health[kimik3]",
        "service.models[kimik3]",
    ]
    first = result["instances"][0]
    assert (first["name"], first["url"]) == ("glm52", two[0].url)
    assert (first["prefix_cache"]["queries"], first["prefix_cache"]["hits"]) == (1000.0, 900.0)
    # started again: nothing to write or start, the same checks
    again = _start(args, systemd)
    assert again["changed"] is False and again["started"] == []


def test_the_wait_names_the_other_instances_unit_that_failed(two: tuple[FakeVllm, FakeVllm]) -> None:
    """Each instance is waited for with its own unit first, then the others' (a GPU lost while starting)."""
    two[0].health = 503
    systemd = Systemd({"vllm-glm52.service": True})  # kimik3's unit is not installed
    args = _args(two, wait_timeout=600, check_prefix_cache=False)
    with mock.patch.object(service_check, "_sleep") as slept:
        result = _start(args, systemd)
    assert result["failed"] is True and slept.call_count == 0
    health = result["checks"][0]
    assert health["name"] == "service.health[glm52]" and health["ok"] is False
    assert health["value"].startswith("vllm-kimik3.service")
    assert [SYSTEMCTL, "show", "vllm-glm52.service"] in systemd.calls


def test_a_unit_that_will_not_start_fails_the_phase(two: tuple[FakeVllm, FakeVllm], tmp_path: Path) -> None:
    systemd = Systemd({"vllm-glm52.service": False, "vllm-kimik3.service": False}, start_rc=1)
    result = _start(_args(two, start=True), systemd)
    assert result["failed"] is True and "systemctl start vllm-glm52.service failed" in result["msg"]


def test_check_mode_starts_nothing_and_waits_for_nothing(
    two: tuple[FakeVllm, FakeVllm], tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    systemd = Systemd({"vllm-glm52.service": False, "vllm-kimik3.service": False})
    result = _start(_args(two, start=True, start_marker=str(marker)), systemd, check_mode=True)
    assert result["changed"] is True and not marker.exists()
    assert [c for c in systemd.calls if c[1] == "start"] == [] and two[0].paths == []


def test_instances_and_url_exclude_each_other() -> None:
    result = harness.run_module(
        service_check.main, {"url": "http://127.0.0.1:1", "instances": [{"name": "a", "url": "http://x:1"}]}
    ).result
    assert result["failed"] is True and "mutually exclusive" in result["msg"]


@pytest.fixture(autouse=True)
def no_rdma(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rdma_read, "SYSFS_ROOT", str(tmp_path / "no-rdma"))


def _burn_in(args: dict[str, Any], node: Node) -> dict[str, Any]:
    return harness.run_module(burn_in.main, args, run_command=node, get_bin_path="/usr/bin/nvidia-smi").result


def test_a_passed_burn_in_judges_the_prefix_cache_since_the_baseline_and_marks_the_node(
    tmp_path: Path,
) -> None:
    node = Node(tmp_path / "node")
    marker = tmp_path / "run" / "gate-passed"
    with FakeVllm(hit_rate=0.9) as vllm:
        vllm.queries, vllm.hits = 1000.0, 0.0  # a cold lifetime: only the burn-in's queries pass
        base = [{"name": "glm52", "url": vllm.url, "prefix_cache": {"queries": 1000.0, "hits": 0.0}}]
        result = _burn_in(fast(vllm, baselines=base, passed_marker=str(marker)), node)
    assert "failed" not in result and result["changed"] is True
    assert marker.read_text() == "post-maintenance gate passed\n"
    rate = next(c for c in result["checks"] if c["name"] == "service.prefix_cache_hit_rate[glm52]")
    assert rate["ok"] is True and rate["value"] == 0.9 and "since the baseline" in rate["message"]
    assert {"service.health[glm52]", "service.models[glm52]"} <= {c["name"] for c in result["checks"]}


def test_a_prefix_cache_cliff_after_the_burn_in_fails_and_leaves_no_marker(tmp_path: Path) -> None:
    node = Node(tmp_path / "node")
    marker = tmp_path / "gate-passed"
    with FakeVllm(hit_rate=0.07) as vllm:
        base = [{"name": "glm52", "url": vllm.url, "prefix_cache": {"queries": 0.0, "hits": 0.0}}]
        result = _burn_in(fast(vllm, baselines=base, passed_marker=str(marker)), node)
    assert result["failed"] is True and not marker.exists()
    cliff = [c for c in result["checks"] if not c["ok"]]
    assert [(c["name"], c["value"], c["limit"]) for c in cliff] == [
        ("service.prefix_cache_hit_rate[glm52]", 0.07, 0.5)
    ]
    assert result["msg"].startswith("after the burn-in: glm52 prefix-cache hit rate")


def test_a_failed_burn_in_judges_no_prefix_cache_and_leaves_no_marker(tmp_path: Path) -> None:
    node = Node(tmp_path / "node")
    marker = tmp_path / "gate-passed"
    with FakeVllm() as vllm:
        vllm.completion_status = 500
        base = [{"name": "glm52", "url": vllm.url, "prefix_cache": {"queries": 0.0, "hits": 0.0}}]
        result = _burn_in(fast(vllm, baselines=base, passed_marker=str(marker)), node)
    assert result["failed"] is True and not marker.exists()
    assert not any(c["name"].startswith("service.") for c in result["checks"])
    assert result["msg"].startswith("burn-in failed")


def test_a_baseline_that_is_not_one_is_refused_before_any_load(tmp_path: Path) -> None:
    node = Node(tmp_path / "node")
    with FakeVllm() as vllm:
        base = [{"name": "glm52", "url": vllm.url, "prefix_cache": {"hits": 1}}]
        result = _burn_in(fast(vllm, baselines=base), node)
        assert vllm.completions() == 0
    assert result["failed"] is True and "baseline must be the prefix_cache dict" in result["msg"]


def _stop(args: dict[str, Any], systemd: Systemd, check_mode: bool = False) -> dict[str, Any]:
    return harness.run_module(
        gate_stop.main, args, check_mode, run_command=systemd, get_bin_path=SYSTEMCTL
    ).result


def test_stop_withdraws_both_markers_and_stops_every_unit(tmp_path: Path) -> None:
    markers = [tmp_path / "thermal-gate-passed", tmp_path / "gate-passed"]
    for marker in markers:
        marker.write_text("passed\n")
    systemd = Systemd({"vllm-glm52.service": True, "vllm-kimik3.service": False})
    args = {"markers": [str(m) for m in markers], "units": ["vllm-glm52.service", "vllm-kimik3.service"]}
    result = _stop(args, systemd)
    assert "failed" not in result and result["changed"] is True
    assert not any(m.exists() for m in markers)
    assert systemd.active == {"vllm-glm52.service": False, "vllm-kimik3.service": False}
    assert [SYSTEMCTL, "stop", "vllm-kimik3.service"] not in systemd.calls
    assert result["withdrawn"] == [str(m) for m in markers] and result["stopped"] == ["vllm-glm52.service"]
    again = _stop(args, systemd)
    assert again["changed"] is False


def test_stop_leaves_a_unit_that_was_never_installed(tmp_path: Path) -> None:
    """A node never provisioned, blocked before the drain: its units do not exist, nothing to stop."""
    systemd = Systemd({})
    result = _stop({"markers": [str(tmp_path / "m")], "units": ["vllm-glm52.service"]}, systemd)
    assert (
        "failed" not in result
        and result["changed"] is False
        and result["not_installed"] == ["vllm-glm52.service"]
    )


def test_stop_fails_when_a_unit_will_not_stop(tmp_path: Path) -> None:
    class Stuck(Systemd):
        def __call__(self, module: Any, args: list[str], **kwargs: Any) -> tuple[int, str, str]:
            if args[1] == "stop":
                self.calls.append(list(args))
                return 1, "", "Job for vllm-glm52.service canceled.\n"
            return super().__call__(module, args, **kwargs)

    systemd = Stuck({"vllm-glm52.service": True})
    result = _stop({"markers": [], "units": ["vllm-glm52.service"]}, systemd)
    assert result["failed"] is True and "vllm-glm52.service" in result["msg"]


def test_stop_in_check_mode_changes_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "gate-passed"
    marker.write_text("x")
    systemd = Systemd({"vllm-glm52.service": True})
    result = _stop({"markers": [str(marker)], "units": ["vllm-glm52.service"]}, systemd, check_mode=True)
    assert result["changed"] is True and marker.exists() and systemd.active["vllm-glm52.service"] is True
