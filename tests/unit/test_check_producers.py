"""Each check name is produced by exactly one function (issue 37): the roles, the gate, the watch and
the controller all report a condition under one name, and judge it by calling that one function, never
a copy of their own. The producers are read from the code (tests/unit/check_producers.py: an AST over
plugins/module_utils, plugins/modules and src/gpufleet); PRODUCERS below is every check name and its
one producer, so a new check, or a second judge of an old one, changes this table on purpose.

A name with a device (``health.xid[<bus id>]``) is written ``health.xid[]``; one without
(``health.dcgm_diag``: the diagnostic could not run) is another check.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.unit import check_producers

REPO = Path(__file__).resolve().parents[2]
CATALOG = REPO / "docs" / "health-checks.md"

PRODUCERS = {
    "burn_in.gpu_present[]": "plugins/module_utils/thermal/burn_in.py:checks",
    "burn_in.health": "plugins/modules/burn_in.py:_after_load",
    "burn_in.requests[]": "plugins/module_utils/thermal/burn_in.py:checks",
    "burn_in.roce_counters": "plugins/modules/burn_in.py:_roce_window",
    "burn_in.samples": "plugins/module_utils/thermal/burn_in.py:checks",
    "burn_in.utilization_pct[]": "plugins/module_utils/thermal/burn_in.py:checks",
    "coolant.bmc[]": "plugins/module_utils/mgmt/coolant_read.py:bmc_check",
    "coolant.cdu_health[]": "plugins/module_utils/thermal/thermal_verdict.py:coolant_checks",
    "coolant.cdu_leak[]": "plugins/module_utils/thermal/thermal_verdict.py:coolant_checks",
    "coolant.connectors": "plugins/module_utils/thermal/thermal_verdict.py:coolant_checks",
    "coolant.delta_temp_c[]": "plugins/module_utils/thermal/thermal_verdict.py:coolant_checks",
    "coolant.facts": "plugins/module_utils/thermal/thermal_verdict.py:coolant_checks",
    "coolant.flow_lpm[]": "plugins/module_utils/thermal/thermal_verdict.py:coolant_checks",
    "coolant.health[]": "plugins/module_utils/thermal/thermal_verdict.py:coolant_checks",
    "coolant.leak[]": "plugins/module_utils/thermal/thermal_verdict.py:coolant_checks",
    "coolant.supply_temp_c[]": "plugins/module_utils/thermal/thermal_verdict.py:coolant_checks",
    "drain.left_drained": "plugins/module_utils/node/drain_state.py:_left",
    "fabric.buffer_overrun[]": "plugins/module_utils/rdma/roce_counters.py:judge_phy",
    "fabric.cnp_priority[]": "plugins/module_utils/fabric/fabric_judge.py:judge_switch_port",
    "fabric.ecn_loop[]": "plugins/module_utils/rdma/roce_counters.py:_ecn_loop_check",
    "fabric.host_pfc[]": "plugins/module_utils/rdma/roce_counters.py:judge_port",
    "fabric.link_flaps[]": "plugins/module_utils/rdma/roce_counters.py:judge_link",
    "fabric.link_integrity[]": "plugins/module_utils/rdma/roce_counters.py:judge_phy",
    "fabric.link_rate[]": "plugins/module_utils/rdma/roce_counters.py:judge_link",
    "fabric.lldp": "plugins/module_utils/fabric/fabric.py:read_neighbours",
    "fabric.neighbor[]": "plugins/module_utils/fabric/fabric_judge.py:judge_neighbor",
    "fabric.pause_duration[]": "plugins/module_utils/rdma/roce_counters.py:judge_port",
    "fabric.pause_storm[]": "plugins/module_utils/rdma/roce_counters.py:judge_port",
    "fabric.qp_failures[]": "plugins/module_utils/rdma/roce_counters.py:judge_port",
    "fabric.retransmits[]": "plugins/module_utils/rdma/roce_counters.py:judge_port",
    "fabric.rx_discards[]": "plugins/module_utils/rdma/roce_counters.py:judge_port",
    "fabric.rx_out_of_buffer[]": "plugins/module_utils/rdma/roce_counters.py:judge_port",
    "fabric.symbol_errors[]": "plugins/module_utils/rdma/roce_counters.py:judge_phy",
    "fabric.switch_dscp[]": "plugins/module_utils/fabric/fabric_judge.py:judge_switch_port",
    "fabric.switch_ecn[]": "plugins/module_utils/fabric/fabric_judge.py:judge_switch_port",
    "fabric.switch_mtu[]": "plugins/module_utils/fabric/fabric_judge.py:judge_switch_port",
    "fabric.switch_pfc[]": "plugins/module_utils/fabric/fabric_judge.py:judge_switch_port",
    "fabric.switch_read[]": "plugins/module_utils/fabric/fabric.py:_unread",
    "fabric.traffic[]": "plugins/module_utils/rdma/roce_counters.py:judge_traffic",
    "fleet.versions": "plugins/module_utils/node/fleet_versions.py:not_compared",
    "fleet.versions[]": "plugins/module_utils/node/fleet_versions.py:_judged",
    "gpu.count": "src/gpufleet/checks.py:facts_checks",
    "gpu.ecc.volatile_uncorrected[]": "src/gpufleet/checks.py:_ecc_check",
    "gpu.facts": "src/gpufleet/checks.py:facts_checks",
    "gpu.topology": "src/gpufleet/checks.py:facts_checks",
    "gpu_pinning.gpu_present[]": "plugins/module_utils/gpu/gpu_judge.py:pinning_plan",
    "gpu_pinning.nvlink_domain_gpus[]": "plugins/module_utils/gpu/gpu_judge.py:pinning_plan",
    "gpu_power.enforced_limit_w[]": "plugins/module_utils/gpu/gpu_judge.py:power_check",
    "gpu_power.persistence_mode[]": "plugins/module_utils/gpu/gpu_judge.py:persistence_check",
    "guardian.already_out": "plugins/module_utils/node/out_of_service.py:already_out_check",
    "guardian.replace_hardware": "plugins/module_utils/node/remediation_history.py:replace_hardware_check",
    "health.dcgm_diag": "plugins/module_utils/node/node_health.py:diag_checks",
    "health.dcgm_diag[]": "plugins/module_utils/node/node_health.py:_diag_test_check",
    "health.ecc_uncorrectable[]": "plugins/module_utils/node/node_health.py:memory_checks",
    "health.ecc_uncorrectable_aggregate[]": "plugins/module_utils/node/node_health.py:memory_checks",
    "health.gpu_count": "plugins/module_utils/node/node_health.py:gpu_count_check",
    "health.nccl_busbw": "plugins/module_utils/nccl/nccl_bandwidth.py:judge",
    "health.nccl_correct": "plugins/module_utils/nccl/nccl_bandwidth.py:judge",
    "health.nccl_gpus": "plugins/module_utils/nccl/nccl_bandwidth.py:judge",
    "health.nccl_roce_counters": "plugins/modules/nccl_allreduce.py:main",
    "health.nvlink[]": "plugins/module_utils/node/node_health.py:nvlink_checks",
    "health.pcie_gen": "plugins/module_utils/node/node_health.py:under_load_checks",
    "health.pcie_gen[]": "plugins/module_utils/node/node_health.py:pcie_checks",
    "health.pcie_width[]": "plugins/module_utils/node/node_health.py:pcie_checks",
    "health.row_remap_failure[]": "plugins/module_utils/node/node_health.py:memory_checks",
    "health.row_remap_pending[]": "plugins/module_utils/node/node_health.py:memory_checks",
    "health.pcie_replays[]": "plugins/module_utils/node/node_health.py:pcie_replay_checks",
    "health.recovery_action[]": "plugins/module_utils/node/node_health.py:recovery_action_checks",
    "health.xid[]": "plugins/module_utils/node/node_health.py:xid_checks",
    "health.nvidia_peermem": "plugins/module_utils/node/gpudirect.py:peermem_check",
    "health.acs[]": "plugins/module_utils/node/gpudirect.py:acs_checks",
    "health.service[]": "plugins/module_utils/node/gpudirect.py:service_checks",
    "fabric.mlx5_firmware[]": "plugins/module_utils/rdma/mlx5_health.py:firmware_checks",
    "health.fabric_manager[]": "plugins/module_utils/node/node_health.py:fabric_checks",
    "health.sxid[]": "plugins/module_utils/node/node_health.py:sxid_checks",
    "health.nvlink_errors[]": "plugins/module_utils/node/node_health.py:nvlink_error_checks",
    "nccl_topology.file": "plugins/modules/nccl_topology_check.py:checks_for",
    "nccl_topology.gpus": "plugins/modules/nccl_topology_check.py:checks_for",
    "nccl_topology.nics": "plugins/modules/nccl_topology_check.py:checks_for",
    "nccl_topology.unknown_devices": "plugins/modules/nccl_topology_check.py:checks_for",
    "rdma_link.link_state[]": "plugins/module_utils/rdma/roce_counters.py:link_state_check",
    "rdma_link.speed_gbps[]": "plugins/module_utils/rdma/rdma_judge.py:link_checks",
    "service.health[]": "plugins/module_utils/vllm/vllm_service.py:health_check",
    "service.models[]": "plugins/module_utils/vllm/vllm_instance.py:models_check",
    "service.prefix_cache_hit_rate[]": "plugins/module_utils/vllm/vllm_service.py:prefix_cache_check",
    "switch.nvue[]": "plugins/module_utils/fabric/switch_qos.py:reading_check",
    "switch.sonic[]": "plugins/module_utils/fabric/sonic_leaf.py:reading_check",
    "thermal.clocks_event_reasons[]": "plugins/module_utils/thermal/thermal_verdict.py:gpu_checks",
    "thermal.gpu_temp_c[]": "plugins/module_utils/thermal/thermal_verdict.py:gpu_checks",
    "thermal.gpus": "plugins/module_utils/thermal/thermal_verdict.py:gpu_checks",
    "thermal.hotspot_c[]": "plugins/module_utils/thermal/thermal_verdict.py:gpu_checks",
    "thermal.memory_temp_c[]": "plugins/module_utils/thermal/thermal_verdict.py:gpu_checks",
    "thermal.tlimit_c[]": "plugins/module_utils/thermal/thermal_verdict.py:gpu_checks",
    "watch.gpu_sample_gap": "plugins/module_utils/node/watch.py:gap_check",
    "watch.gpus": "plugins/module_utils/node/watch.py:Watch.run",
    "watch.health": "plugins/module_utils/node/watch.py:Watch._health",
    "watch.roce_counters": "plugins/module_utils/node/watch.py:Watch.__init__",
}


def test_every_check_name_has_one_producer() -> None:
    scan = check_producers.scan()
    assert scan.unreadable == [], "check names the scan cannot read: write them out where judged"
    twice = {name: sorted(where) for name, where in scan.producers.items() if len(where) > 1}
    assert twice == {}, "one check name, more than one judge: call the one function instead"
    assert {name: next(iter(where)) for name, where in scan.producers.items()} == PRODUCERS


def test_the_scan_finds_a_second_producer_and_a_builder() -> None:
    """The scan is not blind: a builder's literal reaches its caller, and a copy would be caught."""
    scan = check_producers.scan()
    # _at_most(name, ...) is a builder: its callers' literals are the names
    assert "plugins/module_utils/rdma/roce_counters.py:judge_port" in scan.producers["fabric.retransmits[]"]
    # thermal_verdict's table rows and functools.partial judges are followed
    assert "thermal.gpu_temp_c[]" in scan.producers and "coolant.flow_lpm[]" in scan.producers
    assert set(scan.builders) >= {"_at_most", "_limit_check", "Window", "AfterLoad"}


def _catalogued() -> set[str]:
    """Every check name docs/health-checks.md names (in backticks, a device as ``[...]``)."""
    found = set()
    for token in re.findall(r"`([a-z_]+\.[a-z_]+)(\[[^\]`]*\])?`", CATALOG.read_text()):
        name, device = token
        if name.split(".")[0] in ("gpufleet", "thermal_gate", "watch_health"):
            continue  # a module's FQCN, a setting
        found.add(name + ("[]" if device else ""))
    return found


def test_every_catalogued_check_has_a_producer() -> None:
    catalogued = _catalogued()
    assert len(catalogued) > 25
    # a name the catalog writes without its device (health.ecc_uncorrectable) is either check
    missing = sorted(n for n in catalogued if n not in PRODUCERS and n + "[]" not in PRODUCERS)
    assert missing == []


def test_the_doc_lists_every_check_with_its_producer() -> None:
    """docs/health-checks.md's "Every check" table is PRODUCERS: a new check, or one that moved, is
    written down with the function that judges it."""
    section = CATALOG.read_text().split("## Every check", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \| `([^`]+)` \| (.+) \|$", section, re.M)
    listed = {name.replace("[…]", "[]"): where for name, where, _ in rows}
    assert listed == PRODUCERS
    assert all(meaning.strip() for _, _, meaning in rows)
