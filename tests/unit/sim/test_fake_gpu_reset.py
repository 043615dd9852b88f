"""The simulated `nvidia-smi -r` / `--gpu-reset` (sim/gpu_reset.py, issue 39): the real tool's refusal
while a client holds a GPU (persistence mode, a vLLM engine's memory, requests in flight), its success
lines, and the reset's effects read back with the node's parsers (gpu_health_readings, node_health)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import gpu_health_readings
from ansible_collections.gpufleet.node.plugins.module_utils.node import node_health
from gpufleet_sim import faults, state, thermal
from gpufleet_sim.tools import nvidia_smi as fake_smi
from gpufleet_sim.tools import vllm_engine

from tests.unit.sim.fake_node import build_nodes, node_fixture, run, smi

IN_USE_TAIL = (
    "currently being used by one or more other processes (e.g., Fabric Manager, CUDA application, graphics "
    "application such as an X server, or a monitoring application such as another instance of nvidia-smi). "
)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_nodes(tmp_path_factory, ("b300-16", "h100-8"))


b300 = node_fixture("b300-16", "built")
h100 = node_fixture("h100-8", "built")


def health(node_dir: Path) -> dict[str, dict[str, Any]]:
    return {g["uuid"]: g for g in gpu_health_readings.parse_health_xml(smi(node_dir, "-q", "-x"))}


def gpus(node_dir: Path) -> list[dict[str, Any]]:
    return state.present_gpus(state.load(node_dir))


def persistence_off(node_dir: Path) -> None:
    assert smi(node_dir, "-pm", "0").endswith("All done.\n")


def engine(node_dir: Path, uuids: list[str]) -> vllm_engine.Engine:
    config = vllm_engine.Config("m", "m", len(uuids), 4096, 8, 8192, 0.9, True, 0.0)
    return vllm_engine.Engine(node_dir, config, uuids)


def test_refused_while_persistence_mode_is_on_with_the_real_message_and_exit_255(h100: Path) -> None:
    """A built node runs in persistence mode (nvidia-persistenced's attachment counts as a client)."""
    bus = gpus(h100)[2]["pci_bus_id"]
    rc, out, err = run(fake_smi, h100, "-r", "-i", "2")
    assert (rc, err) == (255, "")
    assert out == (
        f"The following GPUs could not be reset:\n  GPU {bus}: In use by another client\n\n"
        f"1 device is {IN_USE_TAIL}Please first kill all processes using this device and all compute "
        "applications running in the system.\n"
    )
    assert state.load(h100)["gpu_resets"] == [
        {"argv": ["-r", "-i", "2"], "time": pytest.approx(time.time(), abs=60), "reset": [], "refused": [bus]}
    ]
    persistence_off(h100)
    assert smi(h100, "--gpu-reset", "-i", "2") == f"GPU {bus} was successfully reset.\nAll done.\n"


def test_refused_while_a_vllm_engine_holds_the_gpus_and_nothing_is_reset(h100: Path) -> None:
    persistence_off(h100)
    first, second = gpus(h100)[0], gpus(h100)[1]
    serving = engine(h100, [first["uuid"], second["uuid"]])
    serving.claim_memory()
    faults.inject(h100, "row-remap-pending")  # on GPU 2, idle: still not reset, the call is refused whole
    rc, out, _ = run(fake_smi, h100, "-r", "-i", "0,1,2")
    assert rc == 255
    assert out.startswith(
        "The following GPUs could not be reset:\n"
        f"  GPU {first['pci_bus_id']}: In use by another client\n"
        f"  GPU {second['pci_bus_id']}: In use by another client\n\n2 devices are currently being used"
    )
    assert "Please first kill all processes using these devices and all compute" in out
    assert health(h100)[gpus(h100)[2]["uuid"]]["remapped_rows"]["pending"] is True
    rc, out, _ = run(fake_smi, h100, "-r")  # without -i: every GPU, so the busy ones refuse it too
    assert rc == 255 and out.count("In use by another client") == 2
    serving.release()
    assert smi(h100, "-r", "-i", str(first["uuid"])).startswith(f"GPU {first['pci_bus_id']} was successfully")
    assert [r["reset"] for r in state.load(h100)["gpu_resets"]] == [[], [], [first["pci_bus_id"]]]


def test_refused_while_requests_run_on_the_gpu(h100: Path) -> None:
    persistence_off(h100)
    uuid = gpus(h100)[3]["uuid"]
    with state.locked(h100) as current:
        thermal.change_load(current, [uuid], 1, time.time())
    rc, out, _ = run(fake_smi, h100, "-r", "-i", "3")
    assert rc == 255 and "In use by another client" in out
    with state.locked(h100) as current:
        thermal.change_load(current, [uuid], -1, time.time())
    assert "was successfully reset." in smi(h100, "-r", "-i", "3")


def test_one_gpu_of_an_nvlink_domain_resets_alone_on_blackwell(b300: Path) -> None:
    """nvidia-smi(1): on Ampere+ NVSwitch systems each GPU can be reset individually (Hopper and later
    without Fabric Manager); the other GPUs of its NVLink domain are not touched."""
    persistence_off(b300)
    present = gpus(b300)
    domain = [g for g in present if g["nvlink_domain"] == present[0]["nvlink_domain"]]
    assert len(domain) > 1
    assert (
        smi(b300, "-r", "-i", "0") == f"GPU {present[0]['pci_bus_id']} was successfully reset.\nAll done.\n"
    )
    assert state.load(b300)["gpu_resets"][-1]["reset"] == [present[0]["pci_bus_id"]]


def test_reset_applies_a_pending_remap_takes_a_gpu_reset_action_but_not_a_reboot_nor_xid_79(
    b300: Path,
) -> None:
    present = gpus(b300)
    gpu1, gpu2, gpu6, gpu7 = (present[i]["uuid"] for i in (1, 2, 6, 7))
    for fault in ("row-remap-pending", "ecc-uncorrectable", "recovery-action-reboot", "xid-79"):
        assert faults.inject(b300, fault)
    with state.locked(b300) as current:
        next(g for g in current["gpus"] if g["uuid"] == gpu2)["recovery_action"] = "GPU Reset"
    persistence_off(b300)
    smi(b300, "-pl", "900", "-i", "1")
    before = health(b300)
    assert before[gpu2]["remapped_rows"]["pending"] is True and before[gpu2]["recovery_action"] == "GPU Reset"
    assert gpu6 not in before  # fallen off the bus
    rc, out, _ = run(fake_smi, b300, "-r", "-i", str(gpu6))
    assert (rc, out) == (6, "No devices were found\n")

    out = smi(b300, "-r")
    remaining = gpus(b300)
    assert out.splitlines() == [f"GPU {g['pci_bus_id']} was successfully reset." for g in remaining] + [
        "All done."
    ]
    after = health(b300)
    assert after[gpu2]["remapped_rows"] == {
        "correctable": 0,
        "uncorrectable": 1,
        "pending": False,
        "failure": False,
    }
    assert after[gpu2]["recovery_action"] == "None"
    assert after[gpu7]["recovery_action"] == "Node Reboot"
    assert (
        after[gpu1]["ecc"]["volatile"]["uncorrectable"],
        after[gpu1]["ecc"]["aggregate"]["uncorrectable"],
    ) == (
        0,
        2,
    )
    assert gpu6 not in after  # a reset does not bring back a GPU that fell off the bus
    power = next(g for g in remaining if g["uuid"] == gpu1)["power"]
    assert power["enforced_limit_w"] == power["default_limit_w"]
    failed = {c["name"] for c in node_health.judge({"gpus": list(after.values())}) if not c["ok"]}
    assert f"health.recovery_action[{gpu7}]" in failed
    assert not {name for name in failed if name.startswith("health.row_remap")}
    assert f"health.recovery_action[{gpu2}]" not in failed
