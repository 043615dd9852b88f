"""gpu_judge: power plans validated before any change, persistence state, pinning by NVLink domain."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import gpu_judge, nvidia_smi
from gpufleet_sim import build, faults_gpu, state
from gpufleet_sim.tools import nvsmi_topo, nvsmi_xml

UUID_A = "GPU-00000000-0000-0000-0000-00000000000a"
UUID_B = "GPU-00000000-0000-0000-0000-00000000000b"


def gpu(uuid: str, enforced: float, requested: float, low: float = 200.0, high: float = 1400.0) -> dict:
    return {
        "uuid": uuid,
        "pci_bus_id": "00000000:13:00.0",
        "persistence_mode": True,
        "power": {
            "enforced_limit_w": enforced,
            "requested_limit_w": requested,
            "default_limit_w": high,
            "min_limit_w": low,
            "max_limit_w": high,
        },
    }


@pytest.mark.parametrize(
    ("limit_w", "limits", "targets", "changes"),
    [
        (1400.0, {}, [1400.0, 1400.0], [(f"gpu_power.enforced_limit_w[{UUID_A}]", 1100.0, 1400.0)]),
        (None, {}, [1400.0, 1400.0], [(f"gpu_power.enforced_limit_w[{UUID_A}]", 1100.0, 1400.0)]),
        (
            1400.0,
            {UUID_B: 1300},
            [1400.0, 1300.0],
            [
                (f"gpu_power.enforced_limit_w[{UUID_A}]", 1100.0, 1400.0),
                (f"gpu_power.enforced_limit_w[{UUID_B}]", 1400.0, 1300.0),
            ],
        ),
    ],
)
def test_power_plan(limit_w, limits, targets, changes) -> None:
    gpus = [gpu(UUID_A, 1100.0, 1400.0), gpu(UUID_B, 1400.0, 1400.0)]
    plan, unknown = gpu_judge.power_plan(gpus, limit_w, limits)
    assert [e["target_w"] for e in plan] == targets and unknown == []
    assert [(c["setting"], c["from"], c["to"]) for c in gpu_judge.power_changes(plan)] == changes
    assert [e["uuid"] for e in gpu_judge.capped(plan)] == [UUID_A]


def test_only_the_request_differs() -> None:
    plan, _ = gpu_judge.power_plan([gpu(UUID_A, 1300.0, 1350.0)], 1300.0, {})
    assert gpu_judge.power_changes(plan) == [
        {"setting": f"gpu_power.requested_limit_w[{UUID_A}]", "from": 1350.0, "to": 1300.0}
    ]


def test_out_of_range_targets_are_all_named() -> None:
    gpus = [gpu(UUID_A, 1400.0, 1400.0), gpu(UUID_B, 1400.0, 1400.0)]
    with pytest.raises(gpu_judge.PlanError) as raised:
        gpu_judge.power_plan(gpus, 1500.0, {UUID_B: 150})
    assert str(raised.value) == (
        f"{UUID_A}: target 1500 W is outside its allowed range 200-1400 W; "
        f"{UUID_B}: target 150 W is outside its allowed range 200-1400 W"
    )


def test_unknown_overrides_and_unreadable_ranges() -> None:
    _, unknown = gpu_judge.power_plan([gpu(UUID_A, 1400.0, 1400.0)], None, {UUID_B: 1000})
    assert unknown == [UUID_B]
    blind = gpu(UUID_A, 1400.0, 1400.0)
    blind["power"]["max_limit_w"] = None
    with pytest.raises(gpu_judge.PlanError, match="does not report its default or min/max power limit"):
        gpu_judge.power_plan([blind], 1400.0, {})
    with pytest.raises(gpu_judge.PlanError, match="is not a number of watts"):
        gpu_judge.power_plan([gpu(UUID_A, 1400.0, 1400.0)], None, {UUID_A: "lots"})


@pytest.mark.parametrize(
    ("watts", "arg"), [(1400.0, "1400"), (1312.5, "1312.5"), (700, "700"), (1400.25, "1400.25")]
)
def test_watts_arg(watts, arg) -> None:
    assert gpu_judge.watts_arg(watts) == arg


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("LoadState=loaded\nActiveState=active\nUnitFileState=enabled\n", (True, True, True)),
        ("LoadState=loaded\nActiveState=inactive\nUnitFileState=disabled\n", (True, False, False)),
        ("LoadState=not-found\nActiveState=inactive\nUnitFileState=\n", (False, False, False)),
        ("", (False, False, False)),
    ],
)
def test_daemon_state(text, expected) -> None:
    assert gpu_judge.daemon_state(gpu_judge.parse_systemctl_show(text)) == expected


# ---------------------------------------------------------------- pinning on a simulated node

INSTANCES = [{"name": "glm52", "nvlink_domain": 0}, {"name": "kimik3", "nvlink_domain": 1}]


def node_view(node: dict) -> tuple[list[dict], list[list[str]]]:
    """What the module reads: nvidia-smi's GPUs and the NVLink domains of topo -m."""
    present = state.present_gpus(node)
    gpus = nvidia_smi.parse_query_xml(nvsmi_xml.render(node, list(enumerate(present)), len(present)))["gpus"]
    topology, _ = nvidia_smi.build_topology(
        gpus, nvidia_smi.parse_topo_matrix(nvsmi_topo.render(node, present))
    )
    return gpus, topology["nvlink_domains"]


@pytest.fixture
def b300() -> dict:
    return build.build_node_state("node01", "b300-16", 1)


def test_pins_each_baseboard_in_bus_order(b300: dict) -> None:
    gpus, domains = node_view(b300)
    plan = gpu_judge.pinning_plan(gpus, domains, INSTANCES, 8)
    by_domain = {
        d: [g["uuid"] for g in sorted(b300["gpus"], key=lambda g: g["pci_bus_id"]) if g["nvlink_domain"] == d]
        for d in (0, 1)
    }
    assert plan == {
        "glm52": {"gpus": by_domain[0], "nvlink_domain": 0},
        "kimik3": {"gpus": by_domain[1], "nvlink_domain": 1},
    }


def test_bus_order_swap_keeps_every_instance_on_its_gpus(b300: dict, tmp_path: Path) -> None:
    before = gpu_judge.pinning_plan(*node_view(b300), INSTANCES, 8)
    faults_gpu.bus_order_swapped(b300, tmp_path)
    after_gpus, after_domains = node_view(b300)
    # the swap changed indices and bus IDs...
    assert [g["uuid"] for g in after_gpus] != [
        g["uuid"] for g in node_view(build.build_node_state("node01", "b300-16", 1))[0]
    ]
    # ...and each instance still owns the same physical GPUs, in the same order
    assert gpu_judge.pinning_plan(after_gpus, after_domains, INSTANCES, 8) == before
    for name, domain in (("glm52", 0), ("kimik3", 1)):
        owned = {g["uuid"]: g["nvlink_domain"] for g in b300["gpus"] if g["uuid"] in before[name]["gpus"]}
        assert set(owned.values()) == {domain}


def test_a_short_domain_is_refused(b300: dict, tmp_path: Path) -> None:
    faults_gpu.gpu_missing(b300, tmp_path)  # sysfs writes go to an empty tmp tree
    with pytest.raises(gpu_judge.PlanError) as raised:
        gpu_judge.pinning_plan(*node_view(b300), INSTANCES, 8)
    assert str(raised.value) == (
        "instance kimik3 needs 8 GPUs on NVLink domain 1, which has 7 (1 missing); a GPU may have fallen off "
        "the bus (nvidia-smi -L, Xid 79 in dmesg). Nothing was written."
    )
    # a GPU gone is the node's fault, not the inputs'
    assert raised.value.input_error is False


def test_other_refusals(b300: dict) -> None:
    gpus, domains = node_view(b300)
    # a domain the node lacks and a GPU claimed twice are the inputs' errors (configuration)
    with pytest.raises(
        gpu_judge.PlanError, match="NVLink domain 2 does not exist; this node has domains 0-1"
    ) as domain:
        gpu_judge.pinning_plan(gpus, domains, [{"name": "x", "nvlink_domain": 2}], 8)
    assert domain.value.input_error is True
    with pytest.raises(gpu_judge.PlanError, match="instances a and b both claim") as twice:
        gpu_judge.pinning_plan(
            gpus, domains, [{"name": "a", "nvlink_domain": 0}, {"name": "b", "nvlink_domain": 0}], 4
        )
    assert twice.value.input_error is True
    with pytest.raises(gpu_judge.PlanError, match="GPU-nope is not on this node") as absent:
        gpu_judge.pinning_plan(gpus, domains, [{"name": "x", "gpus": ["GPU-nope"]}], 8)
    assert absent.value.input_error is False


def test_named_gpus_and_a_partial_domain(b300: dict) -> None:
    gpus, domains = node_view(b300)
    chosen = [gpus[3]["uuid"], gpus[1]["uuid"]]
    plan = gpu_judge.pinning_plan(
        gpus,
        domains,
        [{"name": "small", "gpus": chosen}, {"name": "half", "nvlink_domain": 1, "gpu_count": 4}],
        8,
    )
    assert plan["small"] == {"gpus": [gpus[1]["uuid"], gpus[3]["uuid"]], "nvlink_domain": None}
    assert plan["half"]["gpus"] == domains[1][:4]


def test_env_file_round_trip() -> None:
    variables = gpu_judge.instance_env([UUID_A, UUID_B], "/etc/nccl/topo.xml")
    text = gpu_judge.env_text("glm52", 0, variables)
    assert text == (
        "# Managed by gpufleet (gpufleet.node.gpu_pinning); changes here are overwritten.\n"
        "# Instance glm52: NVLink domain 0; GPUs by UUID, in PCI bus order.\n"
        "CUDA_DEVICE_ORDER=PCI_BUS_ID\n"
        f"CUDA_VISIBLE_DEVICES={UUID_A},{UUID_B}\n"
        "NCCL_TOPO_FILE=/etc/nccl/topo.xml\n"
    )
    assert gpu_judge.parse_env(text) == variables
    assert "NCCL_GRAPH_FILE" not in text
