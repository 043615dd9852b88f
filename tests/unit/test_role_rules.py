"""The roles' input rules (plugins/module_utils/node/role_rules.py): each refuses a bad value naming the
setting and its range, and accepts the edges of that range. gpufleet.node.role_inputs judges them on the
controller, one task per node (tests/unit/test_role_inputs_action.py runs it through ansible-playbook)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.gpufleet.node.plugins.module_utils.node import role_rules

REPO = Path(__file__).resolve().parents[2]
UUID = "GPU-" + "0" * 8 + "-0000-0000-0000-" + "0" * 12  # 40 characters, as nvidia-smi -L prints one

# Values every rule accepts (a profile like inventory/sim's b300-16).
GOOD: dict[str, dict[str, Any]] = {
    "drain": {"drain_method": "none", "drain_command": [], "drain_undrain_command": []},
    "rdma_link": {"rdma_link_tos": 106, "rdma_link_mtu": 4200, "rdma_link_min_speed_gbps": 400},
    "rdma_qos": {
        "rdma_qos_pfc_priorities": [3],
        "rdma_qos_ecn_priorities": [3],
        "rdma_qos_cnp_dscp": 48,
        "rdma_qos_global_pause": False,
        "rdma_qos_manage": ["trust", "pfc", "ecn", "cnp_dscp", "global_pause"],
    },
    "fabric": {},
    "nccl_topology": {"nccl_topology_path": "/etc/nccl/topo.xml"},
    "gpu_pinning": {
        "gpu_pinning_instances": [{"name": "glm52", "nvlink_domain": 0}, {"name": "kimik3", "gpus": [UUID]}],
        "gpu_pinning_gpu_count": 8,
    },
    "gpu_power": {"gpu_power_limit_w": 1400, "gpu_power_limits": {UUID: 1000}, "gpu_power_boot_before": []},
    "inference_service": {
        "inference_service_instances": [
            {
                "name": "glm52",
                "model": "/models/GLM",
                "port": 8000,
                "tensor_parallel_size": 8,
                "max_model_len": 131072,
                "max_num_seqs": 768,
                "max_num_batched_tokens": 6144,
                "gpu_memory_utilization": 0.91,
                "extra_args": ["--swap-space", "8", "--trust-remote-code"],
            },
            {"name": "kimi_k3-2", "model": "/models/Kimi", "port": 8001},
        ],
        "__inference_service_managed_flags": ["--host", "--port", "--tensor-parallel-size", "-tp"],
        "inference_service_vllm_path": "/usr/local/bin/vllm",
        "inference_service_env_dir": "/etc/gpufleet/instances",
        "inference_service_start_marker": "/run/gpufleet/thermal-gate-passed",
    },
    "thermal_gate": {
        "thermal_gate_bmc_address": "https://10.20.1.11",
        "thermal_gate_bmc_username": "gate",
        "thermal_gate_bmc_insecure_http_reason": "",
        "thermal_gate_min_prefix_cache_hit_rate": 0.5,
        "thermal_gate_burn_in_seconds": 180,
        "thermal_gate_max_gpu_temp_c": 60,
        "thermal_gate_slowdown_margin_c": None,
        "thermal_gate_max_memory_temp_c": 70,
        "thermal_gate_min_tlimit_c": 20,
        "thermal_gate_min_flow_lpm": 10,
        "thermal_gate_max_supply_c": 35,
        "thermal_gate_max_delta_c": 15,
        "thermal_gate_burn_in_max_gpu_temp_c": 83,
        "thermal_gate_burn_in_max_memory_temp_c": 90,
        "thermal_gate_burn_in_min_tlimit_c": 3,
        "thermal_gate_burn_in_min_utilization_pct": 0,
        "thermal_gate_start_timeout": 900,
        "thermal_gate_burn_in_roce_priority": 3,
        "thermal_gate_burn_in_slowdown_margin_c": None,
        "thermal_gate_burn_in_roce_thresholds": {},
        "thermal_gate_health_expected_gpu_count": None,
        "thermal_gate_health_max_volatile_uncorrectable_ecc": 0,
        "thermal_gate_health_max_aggregate_uncorrectable_ecc": None,
        "thermal_gate_health_turned_off": {},
        "thermal_gate_fleet_versions": {},
        "thermal_gate_dcgm_diag_level": 0,
        "thermal_gate_dcgmi_path": "",
        "thermal_gate_dcgm_diag_timeout_s": None,
        "thermal_gate_nccl_min_busbw_gbps": None,
        "thermal_gate_nccl_tests_path": "/opt/nccl-tests/build/all_reduce_perf",
        "thermal_gate_nccl_gpus": 8,
        "thermal_gate_nccl_min_bytes": "64M",
        "thermal_gate_nccl_max_bytes": "1G",
        "thermal_gate_nccl_timeout_s": 300,
    },
}
NCCL = {"thermal_gate_nccl_min_busbw_gbps": 150}


def refused(role: str, **changed: Any) -> list[str]:
    return [message for _, message in role_rules.refusals(role, {**GOOD[role], **changed})]


def test_the_table_holds_every_role_and_each_reads_its_own_settings() -> None:
    assert tuple(role_rules.RULES) == role_rules.ROLES
    for role in role_rules.ROLES:
        assert set(role_rules.settings(role)) == set(GOOD[role]), role
        assert all(rule.role == role and rule.name for rule in role_rules.RULES[role]), role


@pytest.mark.parametrize("role", role_rules.ROLES)
def test_every_setting_a_rule_reads_is_the_roles_own_input(role: str) -> None:
    """A rule reads a setting the role defines (argument spec, defaults or vars), so a typo in the table
    cannot leave a setting unjudged."""
    specs = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    defined = set(specs["argument_specs"]["preflight"]["options"])
    for part in ("defaults", "vars"):
        path = REPO / "roles" / role / part / "main.yml"
        if path.exists():
            defined |= set(yaml.safe_load(path.read_text()) or {})
    assert set(role_rules.settings(role)) <= defined, set(role_rules.settings(role)) - defined


@pytest.mark.parametrize("role", role_rules.ROLES)
def test_good_values_pass_every_rule(role: str) -> None:
    assert refused(role) == []


# Each rule's edge values, accepted.
EDGES = [
    ("drain", {"drain_method": "command", "drain_command": ["a"], "drain_undrain_command": ["b"]}),
    ("rdma_link", {"rdma_link_tos": 0, "rdma_link_mtu": 68, "rdma_link_min_speed_gbps": 0}),
    ("rdma_link", {"rdma_link_tos": 255, "rdma_link_mtu": 9978}),
    ("rdma_link", {"rdma_link_tos": "106"}),  # | int reads it
    ("rdma_qos", {"rdma_qos_pfc_priorities": [0, 7], "rdma_qos_ecn_priorities": [], "rdma_qos_cnp_dscp": 0}),
    ("rdma_qos", {"rdma_qos_cnp_dscp": 63}),
    ("rdma_qos", {"rdma_qos_global_pause": True, "rdma_qos_pfc_priorities": []}),
    ("rdma_qos", {"rdma_qos_global_pause": True, "rdma_qos_manage": ["trust", "global_pause"]}),
    ("gpu_pinning", {"gpu_pinning_gpu_count": 1, "gpu_pinning_instances": []}),
    (
        "gpu_pinning",
        {"gpu_pinning_instances": [{"name": "a", "nvlink_domain": 0, "gpus": None, "gpu_count": 1}]},
    ),
    ("gpu_power", {"gpu_power_limit_w": None, "gpu_power_limits": {}}),
    ("gpu_power", {"gpu_power_limit_w": 0.1, "gpu_power_boot_before": ["vllm@glm52.service"]}),
    (
        "inference_service",
        {
            "inference_service_instances": [
                {
                    "name": "a",
                    "port": 1,
                    "max_num_seqs": 4,
                    "max_num_batched_tokens": 4,
                    "gpu_memory_utilization": 1,
                },
                # default(1, true): 0 and null read as vLLM's own default
                {"name": "b", "port": 65535, "max_model_len": 0, "max_num_seqs": None},
                {"name": "c", "port": 2, "extra_args": ["--hostname=x", "--max-model-length"]},
            ]
        },
    ),
    (
        "thermal_gate",
        {
            "thermal_gate_min_prefix_cache_hit_rate": 0,
            "thermal_gate_burn_in_seconds": 1,
            "thermal_gate_max_gpu_temp_c": 0,
            "thermal_gate_max_memory_temp_c": 150,
            "thermal_gate_min_tlimit_c": 150,
            "thermal_gate_min_flow_lpm": 0.01,
            "thermal_gate_max_supply_c": 100,
            "thermal_gate_max_delta_c": 0,
            "thermal_gate_burn_in_max_gpu_temp_c": 150,
            "thermal_gate_burn_in_max_memory_temp_c": 0,
            "thermal_gate_burn_in_min_tlimit_c": 0.1,
            "thermal_gate_burn_in_min_utilization_pct": 100,
            "thermal_gate_start_timeout": 7200,
            "thermal_gate_burn_in_roce_priority": 7,
            "thermal_gate_slowdown_margin_c": 150,
            "thermal_gate_burn_in_slowdown_margin_c": 0.1,
            "thermal_gate_burn_in_roce_thresholds": {"link_flap_settle_s": 3600, "link_flaps": 0},
            "thermal_gate_health_expected_gpu_count": 64,
            "thermal_gate_health_max_aggregate_uncorrectable_ecc": 0,
            "thermal_gate_dcgm_diag_level": 4,
            "thermal_gate_dcgm_diag_timeout_s": 86400,
            "thermal_gate_fleet_versions": {"NVIDIA B300": {"driver": "580.65.06", "vbios": ["97.00.1"]}},
        },
    ),
    (
        "thermal_gate",
        {
            "thermal_gate_min_prefix_cache_hit_rate": 1,
            "thermal_gate_burn_in_seconds": 3600,
            "thermal_gate_min_flow_lpm": 10000,
            "thermal_gate_start_timeout": 1,
            "thermal_gate_burn_in_roce_priority": 0,
            "thermal_gate_burn_in_min_utilization_pct": None,
            "thermal_gate_health_expected_gpu_count": 1,
            "thermal_gate_dcgm_diag_timeout_s": 60,
            "thermal_gate_bmc_address": " HTTP://10.20.1.11",
            "thermal_gate_bmc_insecure_http_reason": "CHG-4711 lab BMC",
        },
    ),
    ("thermal_gate", {**NCCL, "thermal_gate_nccl_gpus": 1, "thermal_gate_nccl_timeout_s": 10}),
    (
        "thermal_gate",
        {
            "thermal_gate_nccl_min_busbw_gbps": 10000,
            "thermal_gate_nccl_gpus": 64,
            "thermal_gate_nccl_timeout_s": 3600,
            "thermal_gate_nccl_min_bytes": "999999999999",
            "thermal_gate_nccl_max_bytes": "8G",
        },
    ),
    # without a floor the all-reduce's other inputs are not judged
    ("thermal_gate", {"thermal_gate_nccl_gpus": 0, "thermal_gate_nccl_min_bytes": "lots"}),
]


@pytest.mark.parametrize(("role", "changed"), EDGES)
def test_the_edges_of_each_range_pass(role: str, changed: dict[str, Any]) -> None:
    assert refused(role, **changed) == []


# Each rule, refusing: the role, the bad values and the words of its message (the setting and its range).
BAD = [
    (
        "drain",
        {"drain_method": "ssh"},
        "drain_method (gpufleet_drain_method) is ssh; use none, slurm, kubernetes or command, and with "
        "command set gpufleet_drain_command and gpufleet_undrain_command (argv lists)",
    ),
    (
        "drain",
        {"drain_method": "command", "drain_undrain_command": []},
        "drain_method (gpufleet_drain_method) is",
    ),
    ("rdma_link", {"rdma_link_tos": 256}, "rdma_link_tos is 256; a ToS is 0..255 (106 = DSCP 26"),
    ("rdma_link", {"rdma_link_tos": -1}, "rdma_link_tos is -1; a ToS is 0..255"),
    ("rdma_link", {"rdma_link_mtu": 67}, "rdma_link_mtu is 67; an mlx5 netdev takes an MTU of 68..9978"),
    ("rdma_link", {"rdma_link_mtu": 9979}, "rdma_link_mtu is 9979;"),
    ("rdma_link", {"rdma_link_min_speed_gbps": -1}, "rdma_link_min_speed_gbps is -1; use 0 or more Gb/s"),
    (
        "rdma_qos",
        {"rdma_qos_pfc_priorities": [3, 8]},
        "rdma_qos_pfc_priorities is [3, 8]: 8 is not a priority; priorities are 0..7 (e.g. [3])",
    ),
    (
        "rdma_qos",
        {"rdma_qos_ecn_priorities": [-1]},
        "rdma_qos_ecn_priorities is [-1]: -1 is not a priority; priorities are 0..7",
    ),
    ("rdma_qos", {"rdma_qos_cnp_dscp": 64}, "rdma_qos_cnp_dscp is 64; a DSCP is 0..63 (48 for CNPs)"),
    ("rdma_qos", {"rdma_qos_cnp_dscp": "48"}, "rdma_qos_cnp_dscp is 48; a DSCP is 0..63"),  # no | int there
    (
        "rdma_qos",
        {"rdma_qos_global_pause": True},
        "rdma_qos_global_pause is true and rdma_qos_pfc_priorities is [3]: mlx5 runs either global pause or "
        "PFC",
    ),
    ("nccl_topology", {"nccl_topology_path": "etc/topo.xml"}, "nccl_topology_path must be an absolute path"),
    ("nccl_topology", {"nccl_topology_path": "/etc/topo.txt"}, "ending in .xml; got /etc/topo.txt"),
    (
        "gpu_pinning",
        {"gpu_pinning_instances": [{"name": "a", "nvlink_domain": 0}, {"name": "a", "nvlink_domain": 1}]},
        "gpu_pinning_instances names must be unique file names (no '/'), and gpu_pinning_gpu_count a "
        "positive "
        "number; got names ['a', 'a']",
    ),
    (
        "gpu_pinning",
        {"gpu_pinning_instances": [{"name": "a/b", "nvlink_domain": 0}]},
        "gpu_pinning_instances names must be unique file names",
    ),
    ("gpu_pinning", {"gpu_pinning_gpu_count": 0}, "gpu_pinning_gpu_count=0"),
    (
        "gpu_pinning",
        {"gpu_pinning_instances": [{"name": "a", "nvlink_domain": 0, "gpus": [UUID]}]},
        "gpu_pinning_instances[a] needs exactly one of nvlink_domain (an integer) and gpus",
    ),
    ("gpu_pinning", {"gpu_pinning_instances": [{"name": "a"}]}, "gpu_pinning_instances[a] needs exactly one"),
    (
        "gpu_pinning",
        {"gpu_pinning_instances": [{"name": "a", "nvlink_domain": 0, "gpu_count": 0}]},
        "and gpu_count, when set, must be positive",
    ),
    (
        "gpu_power",
        {"gpu_power_limit_w": 0},
        "gpu_power_limit_w must be null or a positive number of watts, and gpu_power_limits a mapping; got "
        "gpu_power_limit_w=0,",
    ),
    ("gpu_power", {"gpu_power_limits": [1]}, "gpu_power_limits=[1]"),
    (
        "gpu_power",
        {"gpu_power_limits": {"GPU-1": 700}},
        "gpu_power_limits keys must be GPU UUIDs (GPU- and 36 characters, as nvidia-smi -L prints them) and "
        "values positive watts; got GPU-1: 700",
    ),
    ("gpu_power", {"gpu_power_limits": {UUID: 0}}, f"values positive watts; got {UUID}: 0"),
    (
        "gpu_power",
        {"gpu_power_boot_before": ["vllm@glm52"]},
        "gpu_power_boot_before must list unit names with their suffix (vllm@glm52.service); got "
        "['vllm@glm52']",
    ),
    (
        "inference_service",
        {"inference_service_instances": [{"name": "a", "port": 80}, {"name": "b", "port": "80"}]},
        "inference_service_instances must have unique names and ports; names a, b, ports 80, 80",
    ),
    (
        "inference_service",
        {"inference_service_instances": [{"name": "GLM", "port": 80}]},
        "inference_service_instances[GLM]: the name must be lower-case letters, digits, '-' or '_'; port "
        "1..65535",
    ),
    (
        "inference_service",
        {"inference_service_instances": [{"name": "", "port": 80}]},
        "inference_service_instances[]",
    ),
    ("inference_service", {"inference_service_instances": [{"name": "a", "port": 65536}]}, "port 1..65535"),
    ("inference_service", {"inference_service_instances": [{"name": "a", "port": 0}]}, "port 1..65535"),
    (
        "inference_service",
        {"inference_service_instances": [{"name": "a", "port": 1, "tensor_parallel_size": 0}]},
        "tensor_parallel_size, max_model_len and max_num_seqs 1 or more",
    ),
    (
        "inference_service",
        {"inference_service_instances": [{"name": "a", "port": 1, "max_model_len": -1}]},
        "inference_service_instances[a]",
    ),
    (
        "inference_service",
        {
            "inference_service_instances": [
                {"name": "a", "port": 1, "max_num_seqs": 8, "max_num_batched_tokens": 7}
            ]
        },
        "max_num_batched_tokens at least max_num_seqs",
    ),
    (
        "inference_service",
        {"inference_service_instances": [{"name": "a", "port": 1, "gpu_memory_utilization": 0}]},
        "gpu_memory_utilization above 0 and at most 1",
    ),
    (
        "inference_service",
        {"inference_service_instances": [{"name": "a", "port": 1, "gpu_memory_utilization": 1.01}]},
        "gpu_memory_utilization above 0 and at most 1",
    ),
    (
        "inference_service",
        {"inference_service_instances": [{"name": "a", "port": 1, "extra_args": ["--port=9", "-tp", "2"]}]},
        "and extra_args must not repeat a flag the role writes (--port, -tp is in extra_args)",
    ),
    (
        "inference_service",
        {"inference_service_env_dir": "etc/gpufleet"},
        "inference_service_vllm_path (/usr/local/bin/vllm), inference_service_env_dir (etc/gpufleet) and "
        "inference_service_start_marker (/run/gpufleet/thermal-gate-passed) must be absolute paths, as "
        "systemd "
        "needs them",
    ),
    (
        "thermal_gate",
        {"thermal_gate_bmc_username": ""},
        "thermal_gate_bmc_address and thermal_gate_bmc_username must be set (or gpufleet_bmc_address / "
        "gpufleet_bmc_username in inventory): the gate fails closed without coolant readings.",
    ),
    (
        "thermal_gate",
        {"thermal_gate_bmc_address": ""},
        "thermal_gate_bmc_address and thermal_gate_bmc_username",
    ),
    (
        "thermal_gate",
        {"thermal_gate_bmc_address": "http://10.20.1.11", "thermal_gate_bmc_insecure_http_reason": "  "},
        "thermal_gate_bmc_address (or gpufleet_bmc_address) is http://10.20.1.11: plain HTTP would send the "
        "BMC "
        "password in clear text.",
    ),
    (
        "thermal_gate",
        {"thermal_gate_min_prefix_cache_hit_rate": 1.5},
        "thermal_gate_min_prefix_cache_hit_rate must be between 0 and 1, got 1.5",
    ),
    (
        "thermal_gate",
        {"thermal_gate_min_prefix_cache_hit_rate": -0.1},
        "thermal_gate_min_prefix_cache_hit_rate must be between 0 and 1, got -0.1",
    ),
    (
        "thermal_gate",
        {"thermal_gate_burn_in_seconds": 0},
        "thermal_gate_burn_in_seconds must be between 1 and 3600",
    ),
    (
        "thermal_gate",
        {"thermal_gate_burn_in_seconds": 3601},
        "thermal_gate_burn_in_seconds must be between 1 and 3600",
    ),
    (
        "thermal_gate",
        {"thermal_gate_max_gpu_temp_c": 151},
        "thermal_gate_max_gpu_temp_c must be between 0 and 150 C",
    ),
    (
        "thermal_gate",
        {"thermal_gate_max_gpu_temp_c": float("nan")},
        "thermal_gate_max_gpu_temp_c must be between",
    ),
    (
        "thermal_gate",
        {"thermal_gate_max_memory_temp_c": -1},
        "thermal_gate_max_memory_temp_c must be between 0 and 150 C",
    ),
    (
        "thermal_gate",
        {"thermal_gate_min_tlimit_c": 0},
        "thermal_gate_min_tlimit_c must be above 0 (0 passes a GPU at its limit) and at most 150 C, got 0",
    ),
    ("thermal_gate", {"thermal_gate_min_tlimit_c": 150.5}, "thermal_gate_min_tlimit_c must be above 0"),
    (
        "thermal_gate",
        {"thermal_gate_min_flow_lpm": 0},
        "thermal_gate_min_flow_lpm must be above 0 (0 passes a loop with no flow) and at most 10000 L/min, "
        "got 0",
    ),
    ("thermal_gate", {"thermal_gate_min_flow_lpm": 10001}, "thermal_gate_min_flow_lpm must be above 0"),
    (
        "thermal_gate",
        {"thermal_gate_max_supply_c": 180},
        "thermal_gate_max_supply_c must be between 0 and 100 C, got 180",
    ),
    (
        "thermal_gate",
        {"thermal_gate_max_delta_c": -2},
        "thermal_gate_max_delta_c must be between 0 and 100 K, got -2",
    ),
    (
        "thermal_gate",
        {"thermal_gate_burn_in_max_gpu_temp_c": 151},
        "thermal_gate_burn_in_max_gpu_temp_c must be between 0 and 150 C, got 151",
    ),
    (
        "thermal_gate",
        {"thermal_gate_burn_in_max_memory_temp_c": 151},
        "thermal_gate_burn_in_max_memory_temp_c must be between 0 and 150 C",
    ),
    (
        "thermal_gate",
        {"thermal_gate_burn_in_min_tlimit_c": 0},
        "thermal_gate_burn_in_min_tlimit_c must be above 0",
    ),
    (
        "thermal_gate",
        {"thermal_gate_burn_in_min_utilization_pct": 150},
        "thermal_gate_burn_in_min_utilization_pct must be between 0 and 100 % (0 or null turns it off), got "
        "150",
    ),
    (
        "thermal_gate",
        {"thermal_gate_start_timeout": 0},
        "thermal_gate_start_timeout must be between 1 and 7200 s",
    ),
    (
        "thermal_gate",
        {"thermal_gate_start_timeout": 7201},
        "thermal_gate_start_timeout must be between 1 and 7200 s",
    ),
    (
        "thermal_gate",
        {"thermal_gate_burn_in_roce_priority": 8},
        "thermal_gate_burn_in_roce_priority must be a priority 0..7, got 8",
    ),
    (
        "thermal_gate",
        {"thermal_gate_slowdown_margin_c": 0},
        "thermal_gate_slowdown_margin_c must be above 0 (0 passes a GPU at its slowdown temperature) and at "
        "most 150 C, or null to judge against the absolute limit alone, got 0",
    ),
    (
        "thermal_gate",
        {"thermal_gate_burn_in_slowdown_margin_c": 151},
        "thermal_gate_burn_in_slowdown_margin_c must be above 0 (0 passes a GPU at its slowdown temperature) "
        "and at most 150 C, or null to judge against the absolute limit alone, got 151",
    ),
    (
        "thermal_gate",
        {"thermal_gate_burn_in_slowdown_margin_c": "warm"},
        "thermal_gate_burn_in_slowdown_margin_c must be above 0",
    ),
    (
        "thermal_gate",
        {"thermal_gate_burn_in_roce_thresholds": {"link_flap_settle_s": 3601}},
        "thermal_gate_burn_in_roce_thresholds: link_flap_settle_s must be 0..3600 s, not 3601",
    ),
    (
        "thermal_gate",
        {"thermal_gate_burn_in_roce_thresholds": {"link_flap_settle_s": -5}},
        "thermal_gate_burn_in_roce_thresholds: link_flap_settle_s must be 0 or more, not -5",
    ),
    (
        "thermal_gate",
        {"thermal_gate_burn_in_roce_thresholds": {"settle_s": 30}},
        "thermal_gate_burn_in_roce_thresholds: settle_s is not a threshold (known: ",
    ),
    (
        "thermal_gate",
        {"thermal_gate_burn_in_roce_thresholds": [30]},
        "thermal_gate_burn_in_roce_thresholds must be a mapping of threshold names to numbers, got",
    ),
    (
        "thermal_gate",
        {"thermal_gate_health_expected_gpu_count": 65},
        "thermal_gate_health_expected_gpu_count must be 1..64 (or null), got 65",
    ),
    ("thermal_gate", {"thermal_gate_health_expected_gpu_count": 0}, "must be 1..64 (or null), got 0"),
    (
        "thermal_gate",
        {"thermal_gate_health_max_volatile_uncorrectable_ecc": -1},
        "thermal_gate_health_max_volatile_uncorrectable_ecc and "
        "thermal_gate_health_max_aggregate_uncorrectable_ecc "
        "must be 0 or more (the aggregate may be null), got -1 and ;",
    ),
    ("thermal_gate", {"thermal_gate_health_max_aggregate_uncorrectable_ecc": -1}, "got 0 and -1"),
    (
        "thermal_gate",
        {"thermal_gate_health_turned_off": ["nvlink"]},
        "thermal_gate_health_turned_off must map",
    ),
    (
        "thermal_gate",
        {"thermal_gate_fleet_versions": {"NVIDIA B300": {"driver": 580.65}}},
        "Refusing to compare the versions: thermal_gate_fleet_versions['NVIDIA B300'][driver] must be a "
        "version "
        "string (quote it: 13.0 in YAML is a number), got 580.65.",
    ),
    (
        "thermal_gate",
        {"thermal_gate_dcgm_diag_level": 5},
        "thermal_gate_dcgm_diag_level must be 0 (off) or a DCGM diagnostic level 1..4 (dcgmi diag -r N), "
        "got 5; "
        "thermal_gate_dcgm_diag_timeout_s must be 60..86400 s or null (by level), got null",
    ),
    (
        "thermal_gate",
        {"thermal_gate_dcgm_diag_timeout_s": 59},
        "thermal_gate_dcgm_diag_timeout_s must be 60..86400 s",
    ),
    ("thermal_gate", {"thermal_gate_dcgm_diag_timeout_s": 86401}, "or null (by level), got 86401"),
    (
        "thermal_gate",
        {"thermal_gate_nccl_min_busbw_gbps": float("inf")},
        "thermal_gate_nccl_min_busbw_gbps must be above 0 and at most 10000 GB/s, or null not to run the "
        "all-reduce (got inf)",
    ),
    (
        "thermal_gate",
        {"thermal_gate_nccl_min_busbw_gbps": 0},
        "at most 10000 GB/s, or null not to run the all-reduce (got 0)",
    ),
    ("thermal_gate", {"thermal_gate_nccl_min_busbw_gbps": float("nan")}, "(got nan)"),
    ("thermal_gate", {**NCCL, "thermal_gate_nccl_gpus": 65}, "needs thermal_gate_nccl_gpus 1..64 (got 65)"),
    (
        "thermal_gate",
        {**NCCL, "thermal_gate_nccl_timeout_s": 9},
        "thermal_gate_nccl_timeout_s 10..3600 (got 9)",
    ),
    (
        "thermal_gate",
        {**NCCL, "thermal_gate_nccl_timeout_s": 3601},
        "thermal_gate_nccl_timeout_s 10..3600 (got 3601)",
    ),
    (
        "thermal_gate",
        {**NCCL, "thermal_gate_nccl_max_bytes": "8T"},
        "sizes such as 64M or 1G (got 64M and 8T)",
    ),
    ("thermal_gate", {**NCCL, "thermal_gate_nccl_min_bytes": "1234567890123"}, "sizes such as 64M or 1G"),
    ("thermal_gate", {**NCCL, "thermal_gate_nccl_tests_path": ""}, "and thermal_gate_nccl_tests_path"),
]


@pytest.mark.parametrize(("role", "changed", "said"), BAD)
def test_each_rule_refuses_a_bad_value_naming_the_setting_and_its_range(
    role: str, changed: dict[str, Any], said: str
) -> None:
    messages = refused(role, **changed)
    assert len(messages) == 1, messages
    assert said in messages[0], messages


def test_every_rule_is_exercised_by_a_refusal() -> None:
    """No rule of the table without a test that it refuses."""
    names = set()
    for role, changed, _ in BAD:
        names |= {rule.name for rule, _ in role_rules.refusals(role, {**GOOD[role], **changed})}
    every = {rule.name for rules in role_rules.RULES.values() for rule in rules}
    assert every - names == set()


def test_a_value_a_rule_cannot_read_is_refused_naming_its_settings() -> None:
    """Fail closed: a null list, an instance without its name (the assert's own error, today a refusal)."""
    (message,) = refused("gpu_power", gpu_power_boot_before=None)
    assert message.startswith("gpu_power_boot_before cannot be judged: TypeError"), message
    messages = refused("gpu_pinning", gpu_pinning_instances=[{"nvlink_domain": 0}])
    assert messages and all("gpu_pinning_instances" in m and "cannot be judged" in m for m in messages), (
        messages
    )


def test_all_refusals_of_a_role_are_named_at_once() -> None:
    messages = refused("thermal_gate", thermal_gate_max_supply_c=180, thermal_gate_start_timeout=0)
    assert [m.split(" must")[0] for m in messages] == [
        "thermal_gate_max_supply_c",
        "thermal_gate_start_timeout",
    ]


def test_null_is_written_as_ansible_writes_it_in_a_message() -> None:
    (message,) = refused("gpu_power", gpu_power_limit_w=-1, gpu_power_limits=None)
    assert message.endswith("got gpu_power_limit_w=-1, gpu_power_limits="), message


# ----------------------------------------------------------------------------- the tools on the node


def test_the_tools_looked_for_are_the_ones_the_profile_runs_at_a_path() -> None:
    values = GOOD["thermal_gate"]
    assert role_rules.tool_paths(values) == []
    # dcgmi left to PATH is the node's own install, judged by the health step
    assert role_rules.tool_paths({**values, "thermal_gate_dcgm_diag_level": 2}) == []
    tools = role_rules.tool_paths(
        {
            **values,
            **NCCL,
            "thermal_gate_dcgm_diag_level": 2,
            "thermal_gate_dcgmi_path": "/opt/dcgm/bin/dcgmi",
        }
    )
    assert [(t["setting"], t["path"]) for t in tools] == [
        ("thermal_gate_nccl_tests_path", "/opt/nccl-tests/build/all_reduce_perf"),
        ("thermal_gate_dcgmi_path", "/opt/dcgm/bin/dcgmi"),
    ]
    assert tools[1]["why"] == "DCGM dcgmi, run with thermal_gate_dcgm_diag_level 2"


@pytest.mark.parametrize(
    ("stat", "what"),
    [
        ({"exists": False}, "not there"),
        ({"exists": True, "isreg": False, "executable": True}, "not a regular file"),
        ({"exists": True, "isreg": True, "executable": False}, "not executable"),
    ],
)
def test_a_tool_that_is_no_executable_file_is_refused_naming_its_setting(
    stat: dict[str, Any], what: str
) -> None:
    tool = {"setting": "thermal_gate_dcgmi_path", "path": "/opt/dcgm/bin/dcgmi", "why": "DCGM dcgmi"}
    assert role_rules.tool_refusal(tool, stat) == (
        "thermal_gate_dcgmi_path is /opt/dcgm/bin/dcgmi, which is not an executable file on this node "
        f"({what}): set it to where DCGM dcgmi is installed on the node, or install it there"
    )
    assert role_rules.tool_refusal(tool, {"exists": True, "isreg": True, "executable": True}) is None


def test_one_shell_command_says_of_each_path_what_stat_would(tmp_path: Path) -> None:
    """tool_command run by a real sh on real files, its answer read back for tool_refusal: following
    links, as stat(follow=true) did; a path with a space or a quote stays one path."""
    tool = tmp_path / "all reduce's perf"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    plain = tmp_path / "plain"
    plain.write_text("")
    (tmp_path / "link").symlink_to(tool)
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    paths = [
        str(tool),
        str(tmp_path / "link"),
        str(plain),
        str(tmp_path),
        str(tmp_path / "gone"),
        str(tmp_path / "dangling"),
    ]
    done = subprocess.run(
        ["sh", "-c", role_rules.tool_command(paths)], capture_output=True, text=True, check=True
    )
    found = role_rules.tool_answers(done.stdout, len(paths))
    assert found is not None, done.stdout
    said = [
        role_rules.tool_refusal({"setting": "s", "path": p, "why": "w"}, f)
        for p, f in zip(paths, found, strict=True)
    ]
    assert [s and s.split("(")[-1].split(")")[0] for s in said] == [
        None,
        None,
        "not executable",
        "not a regular file",
        "not there",
        "not there",
    ]


@pytest.mark.parametrize("stdout", ["", "ok\n", "ok\nok\nok\n", "Welcome to node01\nok\nok\n", "ok\nyes\n"])
def test_an_answer_that_is_not_one_known_line_per_path_is_not_read(stdout: str) -> None:
    """A banner, a shell that printed more or less: the plugin fails the task (fail closed)."""
    assert role_rules.tool_answers(stdout, 2) is None


# ----------------------------------------------------------------------------- the roles' entry points


@pytest.mark.parametrize("role", role_rules.ROLES)
def test_each_roles_preflight_is_one_role_inputs_task(role: str) -> None:
    tasks = yaml.safe_load((REPO / "roles" / role / "tasks" / "preflight.yml").read_text())
    assert tasks == [{"name": f"Check the {role} inputs", "gpufleet.node.role_inputs": {"roles": [role]}}]
    specs = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    assert specs["argument_specs"]["preflight"]["options"], role  # the entry point include_role validates
