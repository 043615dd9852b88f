"""guardian_plan.plan's decisions: nodes already out of service (a person's drain, gpufleet's record,
replace hardware pending) are left alone; a RoCE port down behind a bad leaf names the leaf and
quarantines nothing; the rest are quarantined with their drain reason and remediation or replace_hardware,
within the breaker, the most certain loss first; the rest would_quarantine."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from gpufleet import checks
from gpufleet.guardian_breaker import BreakerState, record
from gpufleet.guardian_escalation import iso
from gpufleet.guardian_plan import (
    Decision,
    fabric_leaf,
    loss_order,
    plan,
)
from gpufleet.guardian_settings import GuardianSettings, settings_for

NOW = datetime(2026, 12, 6, 20, 30, tzinfo=UTC)
XID = "health.xid[0000:1b:00.0]"
XID_MESSAGE = "GPU 0000:1b:00.0 (GPU-a): Xid 79 in the kernel log since boot (1 events); Xid 79: ..."


def failed(name: str, value: Any = 1, message: str = "") -> dict[str, Any]:
    return checks.check(name, False, value, 0, "", message or f"{name} failed")


def passed(name: str) -> dict[str, Any]:
    return checks.check(name, True, 0, 0, "", "ok")


HEALTHY = [passed("health.gpu_count"), passed(XID), passed("rdma_link.link_state[mlx5_0]")]
GPU_LOST = [failed("health.gpu_count", 7)]
XID_79 = [failed(XID, 79, XID_MESSAGE)]
THERMAL = [failed("thermal.hotspot_c[GPU-a]", 101)]
PORT_DOWN = [failed("rdma_link.link_state[mlx5_0]", "DOWN")]


def _decide(
    hosts: dict[str, list[dict[str, Any]]],
    *,
    histories: dict[str, Any] | None = None,
    drain_records: dict[str, str | None] | None = None,
    hostvars: dict[str, dict[str, Any]] | None = None,
    breaker: BreakerState | None = None,
    leaves: dict[str, str] | None = None,
    cabling: dict[str, dict[str, str]] | None = None,
    drained: dict[str, str | None] | None = None,
) -> dict[str, Decision]:
    settings = settings_for({n: (hostvars or {}).get(n, {}) for n in hosts})
    return plan(
        hosts,
        histories or {},
        drain_records or {},
        settings,
        breaker or BreakerState(),
        leaves or {},
        cabling or {},
        NOW,
        scheduler_drained=drained,
    ).decisions


def test_nothing_unsafe_is_none() -> None:
    found = _decide({"gpu-01": HEALTHY, "gpu-02": [failed("gpu_power.enforced_limit_w[GPU-a]", 500)]})
    assert {n: d.decision for n, d in found.items()} == {"gpu-01": "none", "gpu-02": "none"}
    assert found["gpu-01"].as_guardian() == {}


def test_a_person_drained_node_is_left_alone() -> None:
    found = _decide({"gpu-01": XID_79}, drained={"gpu-01": "RMA 1234 fan swap"})
    assert found["gpu-01"].decision == "left_alone"
    assert "a person's reason: RMA 1234 fan swap" in found["gpu-01"].why
    assert found["gpu-01"].classes == {"xid": [XID]}
    assert found["gpu-01"].reason == "" and found["gpu-01"].remediation == ""


def test_a_gpufleet_drained_node_is_left_alone() -> None:
    by_record = _decide({"gpu-01": XID_79}, drain_records={"gpu-01": "gpufleet gate: health.xid[...] 79"})
    assert by_record["gpu-01"].decision == "left_alone"
    assert "gpufleet's drain record (gpufleet gate: health.xid[...] 79)" in by_record["gpu-01"].why
    by_slurm = _decide({"gpu-01": XID_79}, drained={"gpu-01": "gpufleet watch: health.xid[x] 79"})
    assert by_slurm["gpu-01"].decision == "left_alone" and "gpufleet's reason" in by_slurm["gpu-01"].why
    # an empty record is still a record
    assert _decide({"gpu-01": XID_79}, drain_records={"gpu-01": ""})["gpu-01"].decision == "left_alone"


def test_replace_hardware_pending_is_left_alone_until_cleared() -> None:
    history = [
        {"time": iso(NOW - timedelta(days=1)), "class": "row_remap", "action": "replace_hardware"},
    ]
    found = _decide({"gpu-01": XID_79}, histories={"gpu-01": history})["gpu-01"]
    assert found.decision == "left_alone" and found.replace_hardware
    assert "replace hardware (row_remap, since 2026-12-05T20:30:00Z)" in found.why
    assert 'gpufleet release --limit gpu-01 --reason "..."' in found.why
    # the history file's own shape is read too
    as_file = _decide({"gpu-01": XID_79}, histories={"gpu-01": {"events": history}})
    assert as_file["gpu-01"].decision == "left_alone"
    cleared = [*history, {"time": iso(NOW), "class": "", "action": "cleared"}]
    assert _decide({"gpu-01": XID_79}, histories={"gpu-01": cleared})["gpu-01"].decision == "quarantine"


def test_a_port_down_behind_a_bad_leaf_names_the_leaf_and_quarantines_nothing() -> None:
    hosts = {"gpu-01": PORT_DOWN, "gpu-02": PORT_DOWN}
    cabling = {"gpu-01": {"mlx5_0": "leaf02:swp3"}, "gpu-02": {"mlx5_0": "leaf02:swp4"}}
    result = plan(
        hosts,
        {},
        {},
        settings_for({n: {} for n in hosts}),
        BreakerState(),
        {"leaf02": "PFC off on its RoCE ports"},
        cabling,
        NOW,
    )
    first = result.decisions["gpu-01"]
    assert first.decision == "fabric" and first.leaf == "leaf02"
    assert first.why.startswith("leaf02: PFC off on its RoCE ports (its ports here: mlx5_0 to leaf02:swp3)")
    assert first.as_guardian()["leaf"] == "leaf02" and first.as_guardian()["decision"] == "fabric"
    assert result.decisions["gpu-02"].decision == "fabric"
    assert result.breaker.events == [] and not result.breaker.open
    explains = "PFC off on its RoCE ports: explains the RoCE ports down on gpu-01, gpu-02"
    assert result.leaves == {"leaf02": explains}


def test_the_fabric_explains_only_ports_all_cabled_to_bad_leaves() -> None:
    two_ports = [*PORT_DOWN, failed("rdma_link.link_state[mlx5_1]", "DOWN")]
    bad = {"leaf02": "down"}
    cabling = {"mlx5_0": "leaf02:swp3", "mlx5_1": "leaf01:swp3"}
    # one port to a good leaf: the node's fault
    assert fabric_leaf({"roce_port_down": [c["name"] for c in two_ports]}, cabling, bad) == {}
    # not cabled in the plan
    assert fabric_leaf({"roce_port_down": ["rdma_link.link_state[mlx5_9]"]}, cabling, bad) == {}
    # another unsafe class beside it
    assert fabric_leaf({"xid": [XID], "roce_port_down": [PORT_DOWN[0]["name"]]}, cabling, bad) == {}
    found = _decide(
        {"gpu-01": [*XID_79, *PORT_DOWN], "gpu-02": two_ports},
        leaves=bad,
        cabling={"gpu-01": cabling, "gpu-02": cabling},
        hostvars={"gpu-01": {"guardian_breaker_max_nodes": 5}, "gpu-02": {"guardian_breaker_max_nodes": 5}},
    )
    assert [found[n].decision for n in ("gpu-01", "gpu-02")] == ["quarantine", "would_quarantine"]


def test_quarantine_with_its_reason_and_the_first_configured_remediation() -> None:
    remap = failed("health.row_remap_pending[GPU-a]", True)
    hostvars = {"gpu-01": {"guardian_remediation": {"row_remap": "gpu_reset", "thermal": "reboot"}}}
    found = _decide({"gpu-01": [remap, *XID_79]}, hostvars=hostvars)["gpu-01"]
    assert found.decision == "quarantine"
    assert found.classes == {"xid": [XID], "row_remap": ["health.row_remap_pending[GPU-a]"]}
    # xid has none configured: row_remap's, the first class (UNSAFE's order) with one
    assert found.remediation == "gpu_reset" and not found.replace_hardware
    assert found.reason == "gpufleet watch: health.xid[0000:1b:00.0] 79; health.row_remap_pending[GPU-a] True"
    assert "gpu_reset (guardian_remediation[row_remap]), then the gate" in found.why
    assert found.as_guardian() == {
        "decision": "quarantined",
        "classes": {"xid": [XID], "row_remap": ["health.row_remap_pending[GPU-a]"]},
        "reason": found.reason,
        "remediation": "gpu_reset",
        "why": found.why,
    }


def test_quarantine_only_by_default() -> None:
    found = _decide({"gpu-01": GPU_LOST})["gpu-01"]
    assert (found.decision, found.remediation) == ("quarantine", "")
    assert "no remediation configured for gpu_lost (guardian_remediation): it stays out" in found.why


def test_escalation_replaces_instead_of_remediating() -> None:
    history = [
        {"time": iso(NOW - timedelta(days=d)), "class": "xid", "action": "gpu_reset", "outcome": "ok"}
        for d in (3, 1)
    ]
    found = _decide(
        {"gpu-01": XID_79},
        histories={"gpu-01": history},
        hostvars={"gpu-01": {"guardian_remediation": {"xid": "gpu_reset"}}},
    )["gpu-01"]
    assert found.decision == "quarantine" and found.replace_hardware and found.remediation == ""
    assert "2 remediations of xid within 168 h" in found.why
    assert found.as_guardian()["decision"] == "replace_hardware"


def test_three_of_four_with_a_breaker_of_one_most_certain_loss_first() -> None:
    hosts = {"gpu-a": XID_79, "gpu-b": GPU_LOST, "gpu-c": THERMAL, "gpu-d": HEALTHY}
    hostvars = {n: {"guardian_breaker_max_nodes": 1} for n in hosts}
    state = BreakerState()
    result = plan(hosts, {}, {}, settings_for(hostvars), state, {}, {}, NOW)
    assert {n: d.decision for n, d in result.decisions.items()} == {
        "gpu-a": "would_quarantine",
        "gpu-b": "quarantine",  # a GPU lost: the most certain loss
        "gpu-c": "would_quarantine",
        "gpu-d": "none",
    }
    assert (result.limit, result.serving, result.window_min) == (1, 4, 60)
    would = result.decisions["gpu-a"]
    assert would.reason == "gpufleet watch: health.xid[0000:1b:00.0] 79"
    assert (
        "the circuit breaker is open (since 2026-12-06T20:30:00Z: gpu-a would have been the 2nd" in would.why
    )
    assert 'gpufleet breaker close --reason "..."' in would.why
    # the breaker after the run: gpu-b counted, opened; the state given is not changed
    assert [e["node"] for e in result.breaker.events] == ["gpu-b"] and result.breaker.open
    assert state == BreakerState()


def test_same_class_ordered_by_name_and_an_open_breaker_admits_none() -> None:
    hosts = {"gpu-2": XID_79, "gpu-1": XID_79, "gpu-3": XID_79}
    hostvars = {n: {"guardian_breaker_max_nodes": 2, "guardian_breaker_max_percent": 100} for n in hosts}
    found = _decide(hosts, hostvars=hostvars)
    assert [found[n].decision for n in ("gpu-1", "gpu-2", "gpu-3")] == [
        "quarantine",
        "quarantine",
        "would_quarantine",
    ]
    opened = BreakerState(open=True, opened="2026-12-06T19:00:00Z", opened_why="gpu-9 would have been ...")
    found = _decide(hosts, hostvars=hostvars, breaker=opened)
    assert {d.decision for d in found.values()} == {"would_quarantine"}
    assert "since 2026-12-06T19:00:00Z" in found["gpu-1"].why


def test_quarantines_earlier_in_the_window_count_and_left_alone_nodes_do_not_serve() -> None:
    state = BreakerState()
    record(state, "gpu-9", NOW - timedelta(minutes=30))
    hosts = {f"gpu-{n:02d}": HEALTHY for n in range(18)}
    hosts["gpu-00"] = XID_79
    hosts["gpu-01"] = XID_79
    # 20 nodes, 2 drained by a person: 18 serving, 10 % -> 1, already used by gpu-9
    hosts["gpu-18"] = HEALTHY
    hosts["gpu-19"] = HEALTHY
    result = plan(
        hosts,
        {},
        {},
        settings_for({n: {} for n in hosts}),
        state,
        {},
        {},
        NOW,
        scheduler_drained={"gpu-18": "maintenance", "gpu-19": "maintenance"},
    )
    assert (result.serving, result.limit) == (18, 1)
    assert result.decisions["gpu-00"].decision == "would_quarantine"
    assert result.decisions["gpu-01"].decision == "would_quarantine"


def test_loss_order() -> None:
    assert sorted(
        ["b", "a", "c"], key=lambda n: loss_order(n, {"thermal": []} if n == "a" else {"xid": []})
    ) == [
        "b",
        "c",
        "a",
    ]


def test_missing_settings_are_the_defaults() -> None:
    found = plan({"gpu-01": XID_79}, {}, {}, {}, BreakerState(), {}, {}, NOW).decisions
    assert found["gpu-01"].decision == "quarantine" and found["gpu-01"].remediation == ""
    assert GuardianSettings().breaker.max_nodes == 2


def test_the_nodes_replace_hardware_check_is_read_too() -> None:
    # marked (the watch's node_health judged the history): left alone even without the events given
    marked = [*XID_79, failed("guardian.replace_hardware", "row_remap")]
    found = _decide({"gpu-01": marked}, hostvars={"gpu-01": {"guardian_remediation": {"xid": "reboot"}}})
    assert found["gpu-01"].decision == "left_alone" and found["gpu-01"].replace_hardware
    assert "replace hardware (row_remap)" in found["gpu-01"].why
    # the history could not be read: quarantined, never remediated
    unread = [*XID_79, failed("guardian.replace_hardware", "unread")]
    found = _decide({"gpu-01": unread}, hostvars={"gpu-01": {"guardian_remediation": {"xid": "reboot"}}})
    assert found["gpu-01"].decision == "quarantine" and found["gpu-01"].remediation == ""
    assert "remediation history could not be read" in found["gpu-01"].why
    # unread and nothing unsafe: nothing to do
    assert _decide({"gpu-01": [failed("guardian.replace_hardware", "unread")]})["gpu-01"].decision == "none"
