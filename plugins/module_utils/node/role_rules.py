# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each role's input rules that its argument spec cannot express, defined once (the rule table).

The action plugin gpufleet.node.role_inputs (plugins/action/role_inputs.py) judges them on the
controller, one task per host for every role a playbook runs, after the role's argument spec (its
``preflight`` entry point in meta/argument_specs.yml). They were the roles' ``assert`` tasks
(roles/<role>/tasks/preflight.yml): the same conditions on the same values, Jinja's reading of them
kept (``| int`` is 0 for what is no number, ``| float`` 0.0, a value's truth is Python's), and the same
messages, each naming the setting and what it may be. A rule that cannot be evaluated (a value of a
shape it cannot read) refuses, naming its settings: fail closed, as the assert's error did.

The two rules that need more than the values are split: the fleet's known versions are judged by
module_utils/node/fleet_versions.py's ``validate_known`` (the one validation, also the module's), and a
tool the profile names by path is looked for on the node by the plugin (``tool_paths`` says which,
``tool_command`` is the one shell command that looks, ``tool_answers`` reads its answer back and
``tool_refusal`` judges it).

Pure, stdlib only.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ansible_collections.gpufleet.node.plugins.module_utils.core.inputs import refusal
from ansible_collections.gpufleet.node.plugins.module_utils.node.fleet_versions import validate_known
from ansible_collections.gpufleet.node.plugins.module_utils.rdma.roce_reading import (
    threshold_errors,
    thresholds_from,
)

# The roles whose inputs the table holds, in the order the gate's first play checks them.
ROLES = (
    "drain",
    "rdma_link",
    "rdma_qos",
    "fabric",
    "nccl_topology",
    "gpu_pinning",
    "gpu_power",
    "inference_service",
    "thermal_gate",
)


class Rule(NamedTuple):
    """One rule of a role: ``name`` says what it checks (the assert task it was), ``reads`` the
    settings it reads, ``refuse`` its messages for these values ([] when they pass)."""

    role: str
    name: str
    reads: tuple[str, ...]
    refuse: Callable[[Mapping[str, Any]], list[str]]


# ----------------------------------------------------------------------------- Jinja's reading of values


def as_int(value: Any) -> int:
    """Jinja's ``| int``: a number's integer part, 0 for what is no number."""
    try:
        if isinstance(value, str):
            return int(value, 10)
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):
            return 0


def as_float(value: Any) -> float:
    """Jinja's ``| float``: the number, 0.0 for what is no number."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def shown(value: Any) -> str:
    """A value as ``{{ value }}`` writes it in a message (Ansible writes null as nothing)."""
    return "" if value is None else str(value)


def _length(value: Any) -> int:
    """``| length``; None has none (the assert's error: the rule refuses)."""
    if value is None:
        raise TypeError("null has no length")
    return len(value)


def _between(setting: str, low: float, high: float, message: str, above: bool = False, cast=as_float) -> Rule:
    """``low <= setting <= high`` (``low < setting`` with ``above``), read as ``cast`` reads it;
    ``message`` with ``{got}`` for the value."""

    def refuse(v: Mapping[str, Any]) -> list[str]:
        number = cast(v[setting])
        ok = (number > low if above else number >= low) and number <= high
        return [] if ok else [message.format(got=shown(v[setting]))]

    return Rule("", "", (setting,), refuse)


def _rule(role: str, name: str, rule: Rule) -> Rule:
    return rule._replace(role=role, name=name)


# ----------------------------------------------------------------------------- drain


def _drain_method(v: Mapping[str, Any]) -> list[str]:
    method = v["drain_method"]
    ok = method in ["none", "slurm", "kubernetes", "command"] and (
        method != "command" or (_length(v["drain_command"]) > 0 and _length(v["drain_undrain_command"]) > 0)
    )
    if ok:
        return []
    return [
        "drain_method (gpufleet_drain_method) is %s; use none, slurm, kubernetes or command, "
        "and with command set gpufleet_drain_command and gpufleet_undrain_command (argv lists)"
        % shown(method)
    ]


# ----------------------------------------------------------------------------- rdma_link


def _rdma_link_tos(v: Mapping[str, Any]) -> list[str]:
    if as_int(v["rdma_link_tos"]) in range(0, 256):
        return []
    return [
        "rdma_link_tos is %s; a ToS is 0..255 (106 = DSCP 26 with ECN-capable transport)"
        % shown(v["rdma_link_tos"])
    ]


def _rdma_link_mtu(v: Mapping[str, Any]) -> list[str]:
    if as_int(v["rdma_link_mtu"]) in range(68, 9979):
        return []
    return [
        "rdma_link_mtu is %s; an mlx5 netdev takes an MTU of 68..9978 (4200 for RoCE)"
        % shown(v["rdma_link_mtu"])
    ]


def _rdma_link_min_speed(v: Mapping[str, Any]) -> list[str]:
    if as_int(v["rdma_link_min_speed_gbps"]) >= 0:
        return []
    return [
        "rdma_link_min_speed_gbps is %s; use 0 or more Gb/s (0 only checks that links are up)"
        % shown(v["rdma_link_min_speed_gbps"])
    ]


# ----------------------------------------------------------------------------- rdma_qos


def _priorities(setting: str) -> Callable[[Mapping[str, Any]], list[str]]:
    def refuse(v: Mapping[str, Any]) -> list[str]:
        priorities = v[setting]
        if priorities is None:
            raise TypeError("null is not a list")
        bad = [p for p in priorities if p not in range(8)]
        if not bad:
            return []
        return [
            "%s is %s: %s is not a priority; priorities are 0..7 (e.g. [3])"
            % (setting, shown(priorities), ", ".join(str(p) for p in bad))
        ]

    return refuse


def _cnp_dscp(v: Mapping[str, Any]) -> list[str]:
    if v["rdma_qos_cnp_dscp"] in range(64):
        return []
    return ["rdma_qos_cnp_dscp is %s; a DSCP is 0..63 (48 for CNPs)" % shown(v["rdma_qos_cnp_dscp"])]


def _global_pause(v: Mapping[str, Any]) -> list[str]:
    manage = v["rdma_qos_manage"]
    if not (
        v["rdma_qos_global_pause"]
        and v["rdma_qos_pfc_priorities"]
        and "pfc" in manage
        and "global_pause" in manage
    ):
        return []
    return [
        "rdma_qos_global_pause is true and rdma_qos_pfc_priorities is %s: mlx5 runs either "
        "global pause or PFC; set rdma_qos_global_pause to false for lossless RoCE"
        % shown(v["rdma_qos_pfc_priorities"])
    ]


# ----------------------------------------------------------------------------- nccl_topology


def _topology_path(v: Mapping[str, Any]) -> list[str]:
    path = v["nccl_topology_path"]
    if isinstance(path, str) and path.startswith("/") and path.endswith(".xml"):
        return []
    return ["nccl_topology_path must be an absolute path ending in .xml; got %s" % shown(path)]


# ----------------------------------------------------------------------------- gpu_pinning


def _names(instances: Any) -> list[Any]:
    """``map(attribute='name')``: an instance without a name cannot be judged."""
    if instances is None:
        raise TypeError("null is not a list")
    return [i["name"] for i in instances]


def _pinning_list(v: Mapping[str, Any]) -> list[str]:
    names = _names(v["gpu_pinning_instances"])
    unique = len(set(names)) == len(names)
    ok = unique and not [n for n in names if "/" in n] and as_int(v["gpu_pinning_gpu_count"]) > 0
    if ok:
        return []
    return [
        "gpu_pinning_instances names must be unique file names (no '/'), and gpu_pinning_gpu_count a "
        "positive number; got names %s, gpu_pinning_gpu_count=%s"
        % (shown(names), shown(v["gpu_pinning_gpu_count"]))
    ]


def _set(item: Mapping[str, Any], key: str) -> bool:
    """``item.key is defined and item.key is not none``."""
    return item.get(key) is not None


def _pinning_each(v: Mapping[str, Any]) -> list[str]:
    out = []
    for item in v["gpu_pinning_instances"]:
        ok = _set(item, "nvlink_domain") != _set(item, "gpus") and (
            not _set(item, "gpu_count") or as_int(item["gpu_count"]) > 0
        )
        if not ok:
            out.append(
                "gpu_pinning_instances[%s] needs exactly one of nvlink_domain (an integer) and gpus (a list "
                "of GPU UUIDs), and gpu_count, when set, must be positive" % shown(item["name"])
            )
    return out


# ----------------------------------------------------------------------------- gpu_power


def _power_inputs(v: Mapping[str, Any]) -> list[str]:
    limit, limits = v["gpu_power_limit_w"], v["gpu_power_limits"]
    if (limit is None or as_float(limit) > 0) and isinstance(limits, Mapping):
        return []
    return [
        "gpu_power_limit_w must be null or a positive number of watts, and gpu_power_limits a mapping; got "
        "gpu_power_limit_w=%s, gpu_power_limits=%s" % (shown(limit), shown(limits))
    ]


def _power_overrides(v: Mapping[str, Any]) -> list[str]:
    out = []
    for key, value in v["gpu_power_limits"].items():
        ok = isinstance(key, str) and key.startswith("GPU-") and len(key) == 40 and as_float(value) > 0
        if not ok:
            out.append(
                "gpu_power_limits keys must be GPU UUIDs (GPU- and 36 characters, as nvidia-smi -L prints "
                "them) and values positive watts; got %s: %s" % (shown(key), shown(value))
            )
    return out


def _boot_before(v: Mapping[str, Any]) -> list[str]:
    units = v["gpu_power_boot_before"]
    if units is None:
        raise TypeError("null is not a list")
    if not [u for u in units if "." not in u]:
        return []
    return [
        "gpu_power_boot_before must list unit names with their suffix (vllm@glm52.service); got %s"
        % shown(units)
    ]


# ----------------------------------------------------------------------------- inference_service

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")


def _unique(values: list[Any]) -> list[Any]:
    """Ansible's ``unique``: first of each, in order."""
    out: list[Any] = []
    for value in values:
        if value not in out:
            out.append(value)
    return out


def _service_names_ports(v: Mapping[str, Any]) -> list[str]:
    instances = v["inference_service_instances"]
    names = _names(instances)
    ports = [as_int(i["port"]) for i in instances]
    if len(_unique(names)) == len(names) and len(_unique(ports)) == len(ports):
        return []
    return [
        "inference_service_instances must have unique names and ports; names %s, ports %s"
        % (", ".join(str(n) for n in names), ", ".join(str(p) for p in ports))
    ]


def _repeated_flags(instance: Mapping[str, Any], managed: Any) -> list[str]:
    """The flags of extra_args (``--flag`` or ``--flag=value``) that the role writes itself."""
    extra = instance.get("extra_args", [])
    if extra is None:
        raise TypeError("extra_args is null")
    return [f for f in (str(a).split("=", maxsplit=1)[0] for a in extra) if f in managed]


def _service_instance(instance: Mapping[str, Any], managed: Any) -> str | None:
    name = instance["name"]
    repeated = _repeated_flags(instance, managed)
    batched, seqs = instance.get("max_num_batched_tokens"), instance.get("max_num_seqs")
    memory = instance.get("gpu_memory_utilization")
    ok = (
        _length(name) > 0
        and not set(name) - _NAME_CHARS
        and as_int(instance["port"]) in range(1, 65536)
        and as_int(instance.get("tensor_parallel_size", 1)) >= 1
        # default(1, true): a value of 0 or null is 1 (vLLM's own default)
        and as_int(instance.get("max_model_len") or 1) >= 1
        and as_int(seqs or 1) >= 1
        and (batched is None or seqs is None or as_int(batched) >= as_int(seqs))
        and (memory is None or 0 < as_float(memory) <= 1)
        and not repeated
    )
    if ok:
        return None
    return (
        "inference_service_instances[%s]: the name must be lower-case letters, digits, '-' or '_'; port "
        "1..65535; tensor_parallel_size, max_model_len and max_num_seqs 1 or more; max_num_batched_tokens at "
        "least max_num_seqs; gpu_memory_utilization above 0 and at most 1; and extra_args must not repeat a "
        "flag the role writes%s"
        % (shown(name), " (%s is in extra_args)" % ", ".join(repeated) if repeated else "")
    )


def _service_each(v: Mapping[str, Any]) -> list[str]:
    managed = v["__inference_service_managed_flags"]
    found = (_service_instance(i, managed) for i in v["inference_service_instances"])
    return [m for m in found if m]


def _service_paths(v: Mapping[str, Any]) -> list[str]:
    paths = [
        v[s]
        for s in (
            "inference_service_vllm_path",
            "inference_service_env_dir",
            "inference_service_start_marker",
        )
    ]
    if all(os.path.isabs(p) for p in paths):
        return []
    return [
        "inference_service_vllm_path (%s), inference_service_env_dir (%s) and inference_service_start_marker "
        "(%s) must be absolute paths, as systemd needs them" % tuple(shown(p) for p in paths)
    ]


# ----------------------------------------------------------------------------- thermal_gate


def _bmc_named(v: Mapping[str, Any]) -> list[str]:
    if _length(v["thermal_gate_bmc_address"]) > 0 and _length(v["thermal_gate_bmc_username"]) > 0:
        return []
    return [
        "thermal_gate_bmc_address and thermal_gate_bmc_username must be set (or gpufleet_bmc_address / "
        "gpufleet_bmc_username in inventory): the gate fails closed without coolant readings."
    ]


def _bmc_plain_http(v: Mapping[str, Any]) -> list[str]:
    address = v["thermal_gate_bmc_address"]
    if (
        not str(address).strip().lower().startswith("http://")
        or len(str(v["thermal_gate_bmc_insecure_http_reason"]).strip()) > 0
    ):
        return []
    return [
        "thermal_gate_bmc_address (or gpufleet_bmc_address) is %s: plain HTTP would send the BMC password in "
        "clear text. Use https://, or set thermal_gate_bmc_insecure_http_reason (or "
        "gpufleet_bmc_insecure_http_reason) to why plain HTTP is acceptable; it is reported." % shown(address)
    ]


def _utilization_floor(v: Mapping[str, Any]) -> list[str]:
    # null, like 0, turns the check off
    floor = v["thermal_gate_burn_in_min_utilization_pct"]
    if floor is None or 0 <= as_float(floor) <= 100:
        return []
    return [
        "thermal_gate_burn_in_min_utilization_pct must be between 0 and 100 %% (0 or null turns it off), "
        "got %s" % shown(floor)
    ]


def _roce_priority(v: Mapping[str, Any]) -> list[str]:
    if as_int(v["thermal_gate_burn_in_roce_priority"]) in range(8):
        return []
    return [
        "thermal_gate_burn_in_roce_priority must be a priority 0..7, got %s"
        % shown(v["thermal_gate_burn_in_roce_priority"])
    ]


def _health(v: Mapping[str, Any]) -> list[str]:
    count = v["thermal_gate_health_expected_gpu_count"]
    volatile = v["thermal_gate_health_max_volatile_uncorrectable_ecc"]
    aggregate = v["thermal_gate_health_max_aggregate_uncorrectable_ecc"]
    ok = (
        (count in [None, ""] or 1 <= as_int(count) <= 64)
        and as_int(volatile) >= 0
        and (aggregate is None or as_int(aggregate) >= 0)
        and isinstance(v["thermal_gate_health_turned_off"], Mapping)
    )
    if ok:
        return []
    return [
        "thermal_gate_health_expected_gpu_count must be 1..64 (or null), got %s; "
        "thermal_gate_health_max_volatile_uncorrectable_ecc and "
        "thermal_gate_health_max_aggregate_uncorrectable_ecc must be 0 or more (the aggregate may be null), "
        "got %s and %s; thermal_gate_health_turned_off must map a "
        "check family to its reason" % (shown(count), shown(volatile), shown(aggregate))
    ]


def _known_versions(v: Mapping[str, Any]) -> list[str]:
    known = v["thermal_gate_fleet_versions"]
    if _length(known) == 0:
        return []
    message = refusal("compare the versions", validate_known(known))
    return [message] if message else []


def _matches(pattern: str, value: Any) -> bool:
    """Ansible's ``is match``: the value's text begins with the pattern."""
    return re.match(pattern, str(value)) is not None


def _dcgm(v: Mapping[str, Any]) -> list[str]:
    level, timeout = v["thermal_gate_dcgm_diag_level"], v["thermal_gate_dcgm_diag_timeout_s"]
    ok = _matches("^[0-4]$", level) and (
        timeout in [None, ""] or (_matches("^[0-9]{1,6}$", timeout) and 60 <= as_int(timeout) <= 86400)
    )
    if ok:
        return []
    return [
        "thermal_gate_dcgm_diag_level must be 0 (off) or a DCGM diagnostic level 1..4 (dcgmi diag -r N), "
        "got %s; "
        "thermal_gate_dcgm_diag_timeout_s must be 60..86400 s or null (by level), got %s"
        % (shown(level), "null" if timeout is None else shown(timeout))
    ]


_SIZE = "^[0-9]{1,12}[KMG]?$"


def _nccl(v: Mapping[str, Any]) -> list[str]:
    floor = v["thermal_gate_nccl_min_busbw_gbps"]
    if floor is None:  # no all-reduce
        return []
    # a finite floor: .inf (or a typo of its size) would block every node, nan would pass none
    ok = (
        0 < as_float(floor) <= 10000
        and 1 <= as_int(v["thermal_gate_nccl_gpus"]) <= 64
        and 10 <= as_int(v["thermal_gate_nccl_timeout_s"]) <= 3600
        and _matches(_SIZE, v["thermal_gate_nccl_min_bytes"])
        and _matches(_SIZE, v["thermal_gate_nccl_max_bytes"])
        and _length(v["thermal_gate_nccl_tests_path"]) > 0
    )
    if ok:
        return []
    return [
        "thermal_gate_nccl_min_busbw_gbps must be above 0 and at most 10000 GB/s, or null not to run the "
        "all-reduce (got %s); with a floor the all-reduce needs thermal_gate_nccl_gpus 1..64 (got %s), "
        "thermal_gate_nccl_timeout_s 10..3600 (got %s), sizes such as 64M or 1G (got %s and %s) and "
        "thermal_gate_nccl_tests_path"
        % tuple(
            shown(v[s])
            for s in (
                "thermal_gate_nccl_min_busbw_gbps",
                "thermal_gate_nccl_gpus",
                "thermal_gate_nccl_timeout_s",
                "thermal_gate_nccl_min_bytes",
                "thermal_gate_nccl_max_bytes",
            )
        )
    ]


def _temperature(setting: str) -> Rule:
    return _between(setting, 0, 150, setting + " must be between 0 and 150 C, got {got}")


def _slowdown_margin(setting: str) -> Rule:
    """A GPU temperature limit's margin below the GPU's own slowdown temperature: null (the absolute
    limit alone), or above 0 and at most 150 C (thermal_verdict.LIMIT_RANGES' slowdown_margin_c)."""

    def refuse(v: Mapping[str, Any]) -> list[str]:
        value = v[setting]
        if value is None:
            return []
        number = as_float(value)
        if not isinstance(value, bool) and 0 < number <= 150:
            return []
        return [
            "%s must be above 0 (0 passes a GPU at its slowdown temperature) and at most 150 C, or null to "
            "judge against the absolute limit alone, got %s" % (setting, shown(value))
        ]

    return Rule("", "", (setting,), refuse)


def _roce_thresholds(v: Mapping[str, Any]) -> list[str]:
    """thermal_gate_burn_in_roce_thresholds: known names, numbers 0 or more, link_flap_settle_s at most
    3600 s (the modules' own check, roce_reading.threshold_errors, run here before anything runs)."""
    setting = "thermal_gate_burn_in_roce_thresholds"
    value = v[setting]
    if value is None:
        return []
    if not isinstance(value, Mapping):
        return ["%s must be a mapping of threshold names to numbers, got %s" % (setting, shown(value))]
    return ["%s: %s" % (setting, e) for e in threshold_errors(thresholds_from(value))]


def _tlimit(setting: str) -> Rule:
    return _between(
        setting,
        0,
        150,
        setting + " must be above 0 (0 passes a GPU at its limit) and at most 150 C, got {got}",
        above=True,
    )


def _one(
    role: str, name: str, reads: tuple[str, ...], refuse: Callable[[Mapping[str, Any]], list[str]]
) -> Rule:
    return Rule(role, name, reads, refuse)


# ----------------------------------------------------------------------------- the table

RULES: dict[str, tuple[Rule, ...]] = {
    "drain": (
        _one(
            "drain",
            "Check the drain method and its command",
            ("drain_method", "drain_command", "drain_undrain_command"),
            _drain_method,
        ),
    ),
    "rdma_link": (
        _one("rdma_link", "Check rdma_link_tos", ("rdma_link_tos",), _rdma_link_tos),
        _one("rdma_link", "Check rdma_link_mtu", ("rdma_link_mtu",), _rdma_link_mtu),
        _one(
            "rdma_link", "Check rdma_link_min_speed_gbps", ("rdma_link_min_speed_gbps",), _rdma_link_min_speed
        ),
    ),
    "rdma_qos": (
        _one(
            "rdma_qos",
            "Check rdma_qos_pfc_priorities",
            ("rdma_qos_pfc_priorities",),
            _priorities("rdma_qos_pfc_priorities"),
        ),
        _one(
            "rdma_qos",
            "Check rdma_qos_ecn_priorities",
            ("rdma_qos_ecn_priorities",),
            _priorities("rdma_qos_ecn_priorities"),
        ),
        _one("rdma_qos", "Check rdma_qos_cnp_dscp", ("rdma_qos_cnp_dscp",), _cnp_dscp),
        _one(
            "rdma_qos",
            "Check that global pause and PFC are not both asked for",
            ("rdma_qos_global_pause", "rdma_qos_pfc_priorities", "rdma_qos_manage"),
            _global_pause,
        ),
    ),
    # the cabling plan's type is its argument spec's (role_inputs); what it names is judged on the node
    "fabric": (),
    "nccl_topology": (
        _one("nccl_topology", "Check the topology file path", ("nccl_topology_path",), _topology_path),
    ),
    "gpu_pinning": (
        _one(
            "gpu_pinning",
            "Check the instance list",
            ("gpu_pinning_instances", "gpu_pinning_gpu_count"),
            _pinning_list,
        ),
        _one(
            "gpu_pinning",
            "Check each instance names either an NVLink domain or GPUs",
            ("gpu_pinning_instances",),
            _pinning_each,
        ),
    ),
    "gpu_power": (
        _one(
            "gpu_power",
            "Check the power limit inputs",
            ("gpu_power_limit_w", "gpu_power_limits"),
            _power_inputs,
        ),
        _one("gpu_power", "Check each per-GPU override", ("gpu_power_limits",), _power_overrides),
        _one("gpu_power", "Check the boot unit ordering", ("gpu_power_boot_before",), _boot_before),
    ),
    "inference_service": (
        _one(
            "inference_service",
            "Check inference_service_instances names and ports",
            ("inference_service_instances",),
            _service_names_ports,
        ),
        _one(
            "inference_service",
            "Check each instance's settings",
            ("inference_service_instances", "__inference_service_managed_flags"),
            _service_each,
        ),
        _one(
            "inference_service",
            "Check the paths are absolute",
            ("inference_service_vllm_path", "inference_service_env_dir", "inference_service_start_marker"),
            _service_paths,
        ),
    ),
    "thermal_gate": (
        _one(
            "thermal_gate",
            "Check that the BMC is named",
            ("thermal_gate_bmc_address", "thermal_gate_bmc_username"),
            _bmc_named,
        ),
        _rule(
            "thermal_gate",
            "Check the prefix-cache floor",
            _between(
                "thermal_gate_min_prefix_cache_hit_rate",
                0,
                1,
                "thermal_gate_min_prefix_cache_hit_rate must be between 0 and 1, got {got}",
            ),
        ),
        _rule(
            "thermal_gate",
            "Check the burn-in length",
            _between(
                "thermal_gate_burn_in_seconds",
                1,
                3600,
                "thermal_gate_burn_in_seconds must be between 1 and 3600, got {got}",
                cast=as_int,
            ),
        ),
        _one(
            "thermal_gate",
            "Check that the BMC password is not sent over plain HTTP without a reason",
            ("thermal_gate_bmc_address", "thermal_gate_bmc_insecure_http_reason"),
            _bmc_plain_http,
        ),
        # Physical ranges of the limits (the module checks them again, thermal_verdict.LIMIT_RANGES): a
        # value outside is a typo or a sign error that would turn a check off, never a choice.
        _rule(
            "thermal_gate",
            "Check the idle GPU temperature limit",
            _temperature("thermal_gate_max_gpu_temp_c"),
        ),
        _rule(
            "thermal_gate",
            "Check the idle GPU temperature margin below slowdown",
            _slowdown_margin("thermal_gate_slowdown_margin_c"),
        ),
        _rule(
            "thermal_gate",
            "Check the idle HBM temperature limit",
            _temperature("thermal_gate_max_memory_temp_c"),
        ),
        _rule("thermal_gate", "Check the idle T.Limit margin", _tlimit("thermal_gate_min_tlimit_c")),
        _rule(
            "thermal_gate",
            "Check the coolant flow minimum",
            _between(
                "thermal_gate_min_flow_lpm",
                0,
                10000,
                "thermal_gate_min_flow_lpm must be above 0 (0 passes a loop with no flow) and at most "
                "10000 L/min, got {got}",
                above=True,
            ),
        ),
        _rule(
            "thermal_gate",
            "Check the coolant supply temperature limit",
            _between(
                "thermal_gate_max_supply_c",
                0,
                100,
                "thermal_gate_max_supply_c must be between 0 and 100 C, got {got}",
            ),
        ),
        _rule(
            "thermal_gate",
            "Check the coolant supply/return rise limit",
            _between(
                "thermal_gate_max_delta_c",
                0,
                100,
                "thermal_gate_max_delta_c must be between 0 and 100 K, got {got}",
            ),
        ),
        _rule(
            "thermal_gate",
            "Check the GPU temperature limit under load",
            _temperature("thermal_gate_burn_in_max_gpu_temp_c"),
        ),
        _rule(
            "thermal_gate",
            "Check the GPU temperature margin below slowdown under load",
            _slowdown_margin("thermal_gate_burn_in_slowdown_margin_c"),
        ),
        _one(
            "thermal_gate",
            "Check the RoCE thresholds of the burn-in",
            ("thermal_gate_burn_in_roce_thresholds",),
            _roce_thresholds,
        ),
        _rule(
            "thermal_gate",
            "Check the HBM temperature limit under load",
            _temperature("thermal_gate_burn_in_max_memory_temp_c"),
        ),
        _rule(
            "thermal_gate",
            "Check the T.Limit margin under load",
            _tlimit("thermal_gate_burn_in_min_tlimit_c"),
        ),
        _one(
            "thermal_gate",
            "Check the utilisation floor of the burn-in",
            ("thermal_gate_burn_in_min_utilization_pct",),
            _utilization_floor,
        ),
        _rule(
            "thermal_gate",
            "Check the time the instances get to become healthy",
            _between(
                "thermal_gate_start_timeout",
                1,
                7200,
                "thermal_gate_start_timeout must be between 1 and 7200 s, got {got}",
                cast=as_int,
            ),
        ),
        _one(
            "thermal_gate",
            "Check thermal_gate_burn_in_roce_priority",
            ("thermal_gate_burn_in_roce_priority",),
            _roce_priority,
        ),
        _one(
            "thermal_gate",
            "Check the hardware health inputs",
            (
                "thermal_gate_health_expected_gpu_count",
                "thermal_gate_health_max_volatile_uncorrectable_ecc",
                "thermal_gate_health_max_aggregate_uncorrectable_ecc",
                "thermal_gate_health_turned_off",
            ),
            _health,
        ),
        # The one validation of the known versions (fleet_versions.validate_known), before the drain: a
        # bad entry refuses the node while it still serves.
        _one(
            "thermal_gate",
            "Check the fleet's known versions",
            ("thermal_gate_fleet_versions",),
            _known_versions,
        ),
        _one(
            "thermal_gate",
            "Check the DCGM diagnostic inputs",
            ("thermal_gate_dcgm_diag_level", "thermal_gate_dcgm_diag_timeout_s"),
            _dcgm,
        ),
        _one(
            "thermal_gate",
            "Check the NCCL all-reduce inputs",
            (
                "thermal_gate_nccl_min_busbw_gbps",
                "thermal_gate_nccl_gpus",
                "thermal_gate_nccl_timeout_s",
                "thermal_gate_nccl_min_bytes",
                "thermal_gate_nccl_max_bytes",
                "thermal_gate_nccl_tests_path",
            ),
            _nccl,
        ),
    ),
}


def settings(role: str) -> tuple[str, ...]:
    """Every setting the role's rules read (and ``tool_paths``, for thermal_gate), in order, once."""
    names: list[str] = []
    for rule in RULES[role]:
        names.extend(n for n in rule.reads if n not in names)
    if role == "thermal_gate":
        names.extend(n for n in _TOOL_READS if n not in names)
    return tuple(names)


def refusals(role: str, values: Mapping[str, Any]) -> list[tuple[Rule, str]]:
    """Every rule of ``role`` that refuses ``values`` (setting -> its value), with its message; a rule
    that cannot read its values refuses naming them. A rule that reads a setting an earlier rule refused
    is not judged (it would only repeat it, or fail to read it)."""
    out = []
    refused: set[str] = set()
    for rule in RULES[role]:
        if refused.intersection(rule.reads):
            continue
        try:
            messages = rule.refuse(values)
        except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as error:
            messages = ["%s cannot be judged: %s (%s)" % (", ".join(rule.reads), type(error).__name__, error)]
        out.extend((rule, m) for m in messages)
        if messages:
            refused.update(rule.reads)
    return out


# ----------------------------------------------------------------------------- the tools, on the node

# The tools the gate runs at a path the profile sets are looked for on the node itself while it still
# serves: a path that is not an executable file there is a setting this node cannot meet, refused before
# the drain. dcgmi left to PATH (an empty thermal_gate_dcgmi_path) is the node's own install, judged by
# the health step.
_TOOL_READS = (
    "thermal_gate_nccl_min_busbw_gbps",
    "thermal_gate_nccl_tests_path",
    "thermal_gate_dcgm_diag_level",
    "thermal_gate_dcgmi_path",
)


def tool_paths(values: Mapping[str, Any]) -> list[dict[str, str]]:
    """``{setting, path, why}`` of each tool the node must have at the path the profile gives."""
    tools = []
    if values["thermal_gate_nccl_min_busbw_gbps"] is not None:
        tools.append(
            {
                "setting": "thermal_gate_nccl_tests_path",
                "path": values["thermal_gate_nccl_tests_path"],
                "why": "nccl-tests all_reduce_perf, run with thermal_gate_nccl_min_busbw_gbps set",
            }
        )
    level = values["thermal_gate_dcgm_diag_level"]
    if as_int(level) > 0 and _length(values["thermal_gate_dcgmi_path"]) > 0:
        tools.append(
            {
                "setting": "thermal_gate_dcgmi_path",
                "path": values["thermal_gate_dcgmi_path"],
                "why": "DCGM dcgmi, run with thermal_gate_dcgm_diag_level %s" % shown(level),
            }
        )
    return tools


# What tool_command prints for each path, in its order: test(1) follows links, as stat(follow=true) did.
_ANSWERS = {
    "missing": {"exists": False, "isreg": False, "executable": False},
    "notreg": {"exists": True, "isreg": False, "executable": False},
    "notexec": {"exists": True, "isreg": True, "executable": False},
    "ok": {"exists": True, "isreg": True, "executable": True},
}


def tool_command(paths: list[str]) -> str:
    """One POSIX sh command that says of each path, a line each, whether it is an executable regular
    file for the user the task runs as (missing, notreg, notexec or ok)."""
    return (
        "for p in %s; do "
        'if [ ! -e "$p" ]; then echo missing; elif [ ! -f "$p" ]; then echo notreg; '
        'elif [ ! -x "$p" ]; then echo notexec; else echo ok; fi; done'
        % " ".join(shlex.quote(p) for p in paths)
    )


def tool_answers(stdout: str, count: int) -> list[dict[str, bool]] | None:
    """tool_command's output read back, as ``ansible.builtin.stat`` would have said it; None unless
    it answered for each of the ``count`` paths (a login banner or a shell that printed more: fail
    closed, the caller fails the task)."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    if len(lines) != count or any(line not in _ANSWERS for line in lines):
        return None
    return [dict(_ANSWERS[line]) for line in lines]


def tool_refusal(tool: Mapping[str, str], stat: Mapping[str, Any]) -> str | None:
    """What was found at the tool's path (following links: ``exists``, ``isreg``, ``executable``, as
    ``ansible.builtin.stat`` names them), when it is not an executable regular file."""
    if stat.get("exists") and stat.get("isreg") and stat.get("executable"):
        return None
    what = (
        "not there"
        if not stat.get("exists")
        else "not a regular file"
        if not stat.get("isreg")
        else "not executable"
    )
    return (
        "%s is %s, which is not an executable file on this node (%s): set it to where %s is installed on the "
        "node, or install it there" % (tool["setting"], tool["path"], what, tool["why"])
    )
