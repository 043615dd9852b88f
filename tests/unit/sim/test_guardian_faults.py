"""The simulator's faults a GPU reset or a reboot clears and those that persist (issue 39 item 7), and the
fake nvidia-smi's --query-compute-apps (what the gpu_reset module reads before it resets), read back with
the node's own parsers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import gpu_health_readings, nvidia_smi
from gpufleet_sim import boot, faults, state
from gpufleet_sim.tools import nvidia_smi as fake_smi
from gpufleet_sim.tools import vllm_engine

from tests.unit.mutations import FIXTURES
from tests.unit.sim.fake_node import build_nodes, node_fixture, run, smi

APPS = ["--query-compute-apps=" + ",".join(nvidia_smi.COMPUTE_APP_FIELDS), "--format=csv"]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_nodes(tmp_path_factory, ("b300-16",))


b300 = node_fixture("b300-16", "built")


def health(node_dir: Path) -> dict[str, dict[str, Any]]:
    return {g["uuid"]: g for g in gpu_health_readings.parse_health_xml(smi(node_dir, "-q", "-x"))}


def uuid_of(node_dir: Path, index: int) -> str:
    return str(state.present_gpus(state.load(node_dir))[index]["uuid"])


def reboot(node_dir: Path) -> None:
    with state.locked(node_dir) as current:
        boot.power_cycle(current, node_dir / "sys")


def test_a_pending_remap_is_cleared_by_a_reset_the_persistent_one_comes_back(b300: Path) -> None:
    gpu2 = uuid_of(b300, 2)
    assert faults.inject(b300, "row-remap-pending-persistent")
    before = health(b300)[gpu2]["remapped_rows"]
    assert before["pending"] is True
    assert smi(b300, "-pm", "0").endswith("All done.\n")
    assert smi(b300, "-r").endswith("All done.\n")
    after = health(b300)[gpu2]["remapped_rows"]
    # pending again, and nothing was remapped (the plain fault counts one row remapped: test_fake_gpu_reset)
    assert after == before
    assert "row-remap-pending-persistent" in state.load(b300)["faults"]
    # a reset of the other GPUs leaves it as it is; a reboot resets it and it is pending again
    assert smi(b300, "-r", "-i", "0").endswith("All done.\n")
    reboot(b300)
    assert health(b300)[gpu2]["remapped_rows"] == before
    # replacing the GPU (the fault cleared) ends it
    assert faults.clear(b300, "row-remap-pending-persistent") == ["row-remap-pending-persistent"]
    assert health(b300)[gpu2]["remapped_rows"]["pending"] is False


def test_the_plain_pending_remap_is_gone_after_a_reset(b300: Path) -> None:
    gpu2 = uuid_of(b300, 2)
    assert faults.inject(b300, "row-remap-pending")
    smi(b300, "-pm", "0")
    smi(b300, "-r")
    rows = health(b300)[gpu2]["remapped_rows"]
    assert (rows["pending"], rows["uncorrectable"]) == (False, 1)


def test_a_gpu_that_fell_off_the_bus_is_back_after_a_reboot_not_after_a_reset(b300: Path) -> None:
    gpu6 = uuid_of(b300, 6)
    count = len(state.present_gpus(state.load(b300)))
    assert faults.inject(b300, "xid-79")
    assert gpu6 not in health(b300)
    smi(b300, "-pm", "0")
    smi(b300, "-r")
    assert gpu6 not in health(b300)
    assert "xid-79" in state.load(b300)["faults"]
    reboot(b300)
    assert gpu6 in health(b300)
    assert len(state.present_gpus(state.load(b300))) == count
    assert "xid-79" not in state.load(b300)["faults"]  # the reboot cleared it
    assert (b300 / "sys").exists()


def test_a_gpu_missing_for_good_stays_missing_after_a_reboot(b300: Path) -> None:
    count = len(state.present_gpus(state.load(b300)))
    assert faults.inject(b300, "gpu-missing")
    reboot(b300)
    assert len(state.present_gpus(state.load(b300))) == count - 1
    assert "gpu-missing" in state.load(b300)["faults"]


def test_compute_apps_list_the_gpus_a_process_holds(b300: Path) -> None:
    idle = smi(b300, *APPS)
    assert idle == "gpu_bus_id, gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n"
    assert nvidia_smi.parse_compute_apps(idle) == []
    present = state.present_gpus(state.load(b300))
    uuids = [str(present[i]["uuid"]) for i in (0, 1)]
    config = vllm_engine.Config("m", "m", 2, 4096, 8, 8192, 0.9, True, 0.0)
    vllm_engine.Engine(b300, config, uuids).claim_memory()
    apps = nvidia_smi.parse_compute_apps(smi(b300, *APPS))
    assert [a["uuid"] for a in apps] == uuids
    assert [a["pci_bus_id"] for a in apps] == [present[0]["pci_bus_id"], present[1]["pci_bus_id"]]
    assert all(a["used_memory_mib"] and a["used_memory_mib"] > 0 for a in apps)
    assert all(a["pid"] is None and a["name"] is None for a in apps)  # not modelled: [N/A]
    # -i selects, noheader/nounits as --query-gpu has them
    one = smi(b300, "--query-compute-apps=gpu_uuid,used_memory", "--format=csv,noheader,nounits", "-i", "1")
    assert one.split(", ")[0] == uuids[1] and one.strip().split(", ")[1].isdigit()
    # the same refusals as --query-gpu
    rc, out, _ = run(fake_smi, b300, "--query-compute-apps=pid")
    assert rc == 2 and out.startswith('"--format=" switch is missing.')
    rc, out, _ = run(fake_smi, b300, "--query-compute-apps=nope", "--format=csv")
    assert (rc, out) == (2, 'Field "nope" is not a valid field to query.\n\n')


def test_the_compute_apps_parser_reads_the_real_capture() -> None:
    text = (FIXTURES / "nvidia-smi-text" / "utku-h100-80gb-hbm3-590.48.01-FULL-capture.txt").read_text()
    loaded = text.split("# $ nvidia-smi --query-compute-apps=")[2].split("\n", 2)[2]
    rows = [line for line in loaded.split("\n\n")[0].splitlines() if line.strip()]
    # the capture asked for more fields: keep ours, in our order
    header = [h.strip() for h in rows[0].split(",")]
    wanted = ["gpu_bus_id", "gpu_uuid", "pid", "process_name", "used_gpu_memory [MiB]"]
    picked = [[r.split(", ")[header.index(w)] for w in wanted] for r in rows]
    apps = nvidia_smi.parse_compute_apps("".join(", ".join(r) + "\n" for r in picked))
    assert [(a["pid"], a["name"], a["used_memory_mib"]) for a in apps] == [
        (11327, "/root/tools/memhog", 2566),
        (11328, "/root/tools/memhog", 1542),
        (11345, "./gpu_burn", 15690),
    ]
    assert {a["pci_bus_id"] for a in apps} == {"00000000:00:09.0"}


@pytest.mark.parametrize("text", ["", "pid, used_gpu_memory [MiB]\n", "gpu_bus_id, gpu_uuid, pid\n"])
def test_the_compute_apps_parser_refuses_what_is_not_its_output(text: str) -> None:
    with pytest.raises(nvidia_smi.ParseError):
        nvidia_smi.parse_compute_apps(text)


def test_a_cut_compute_apps_row_is_refused() -> None:
    with pytest.raises(nvidia_smi.ParseError, match="row 1 has 2 values"):
        nvidia_smi.parse_compute_apps(
            "gpu_bus_id, gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n00000000:1B:00.0, GPU-1\n"
        )
