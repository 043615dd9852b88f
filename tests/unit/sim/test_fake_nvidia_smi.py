"""The fake nvidia-smi against the real captures in tests/fixtures/real (see its INDEX.md)."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from gpufleet_sim import build, faults, faults_tools, state
from gpufleet_sim.tools import nvidia_smi

Run = Callable[..., tuple[int, str]]

V13_XML = "nvidia-smi-xml/telegraf-pro-6000-maxq-blackwell-v13.xml"
IDLE_Q = "nvidia-smi-text/utku-h100-80gb-hbm3-590.48.01-idle-q.txt"
MULTI_Q = "nvidia-smi-text/gpud-8xH100-80GB-HBM3-535.161.08-q.txt"
POWER_Q = "nvidia-smi-power-perf/minerva-4x-rtx3090-3090ti-580.65.06-q-d-POWER.txt"
FULL = "nvidia-smi-text/utku-h100-80gb-hbm3-590.48.01-FULL-capture.txt"
CSV = "nvidia-smi-csv/utku-h100-80gb-hbm3-590.48.01-load-query-gpu.csv"
GB200_TOPO = "topo-matrix/aiconfigurator-gb200-nvl72078-T01-4gpu-6nic-ansi-topo-m.txt"


def make_node(path: Path, profile: str) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    state.save(path, build.build_node_state("node01", profile, 1))
    return path


@pytest.fixture
def b300(tmp_path: Path) -> Path:
    return make_node(tmp_path / "b300", "b300-16")


@pytest.fixture
def h100(tmp_path: Path) -> Path:
    return make_node(tmp_path / "h100", "h100-8")


@pytest.fixture
def smi(capsys: pytest.CaptureFixture[str]) -> Run:
    def run(node_dir: Path, *argv: str) -> tuple[int, str]:
        rc = nvidia_smi.main(list(argv), node_dir)
        captured = capsys.readouterr()
        assert captured.err == ""  # nvidia-smi prints errors on stdout too
        return rc, captured.out

    return run


def edit(node_dir: Path, change: Callable[[state.State], None]) -> None:
    with state.locked(node_dir) as current:
        change(current)


def gpu0(node_dir: Path) -> dict[str, Any]:
    return state.present_gpus(state.load(node_dir))[0]


# ----------------------------------------------------------------- -q -x


def xml_skeleton(text: str) -> list[str]:
    """Lines with element text blanked; supported clocks and processes reduced to their tags."""
    lines, skip = [], False
    for line in text.split("\n"):
        if re.search(r"<(supported_clocks|processes)>", line):
            lines.append(line.strip())
            skip = True
        elif re.search(r"</(supported_clocks|processes)>", line):
            skip = False
        if not skip:
            lines.append(re.sub(r">[^<]*<", "><", re.sub(r'id="[^"]*"', 'id=""', line)))
    return [line for line in lines if line != ""]


def test_xml_has_the_v13_layout_line_for_line(
    smi: Run, b300: Path, read_fixture: Callable[[str], str]
) -> None:
    rc, out = smi(b300, "-q", "-x", "-i", "0")
    assert rc == 0
    real = read_fixture(V13_XML)
    assert out.splitlines()[:2] == real.splitlines()[:2]  # <?xml ... ?> and the v13 DOCTYPE
    assert xml_skeleton(out) == xml_skeleton(real)


def tag_paths(elem: ET.Element, prefix: str = "") -> list[str]:
    paths = []
    for child in elem:
        path = f"{prefix}/{child.tag}"
        paths.append(path)
        paths.extend(tag_paths(child, path))
    return paths


def test_xml_first_gpu_has_every_element_of_the_real_capture_in_order(
    smi: Run, h100: Path, read_fixture: Callable[[str], str]
) -> None:
    real = ET.fromstring(read_fixture(V13_XML).split("\n", 2)[2]).find("gpu")
    _, out = smi(h100, "-q", "-x")
    mine = ET.fromstring(out.split("\n", 2)[2]).find("gpu")
    assert real is not None and mine is not None
    # no process runs on a simulated GPU, so process_info is the one block the capture has and we lack
    wanted = [p for p in dict.fromkeys(tag_paths(real)) if "/process_info" not in p]
    have = list(dict.fromkeys(tag_paths(mine)))
    assert [p for p in have if p in wanted] == wanted


def test_xml_values_come_from_state(smi: Run, b300: Path) -> None:
    def change(current: state.State) -> None:
        gpu = state.present_gpus(current)[2]
        gpu["temperature"]["gpu_c"] = 80
        gpu["power"]["enforced_limit_w"] = 1100.0
        gpu["persistence_mode"] = False
        gpu["clocks_event_reasons"] = ["sw_thermal_slowdown", "hw_thermal_slowdown"]

    edit(b300, change)
    _, out = smi(b300, "-q", "-x")
    root = ET.fromstring(out.split("\n", 2)[2])
    assert root.findtext("attached_gpus") == "16"
    assert root.findtext("driver_version") == "580.95.05" and root.findtext("cuda_version") == "13.0"
    gpus = root.findall("gpu")
    assert [g.get("id") for g in gpus] == [g["pci_bus_id"] for g in state.present_gpus(state.load(b300))]
    gpu = gpus[2]
    assert gpu.findtext("persistence_mode") == "Disabled"
    assert gpu.findtext("temperature/gpu_temp") == "80 C"
    assert gpu.findtext("temperature/gpu_temp_tlimit") == "5 C"  # max operating 85 C - 80 C
    assert gpu.findtext("gpu_power_readings/current_power_limit") == "1100.00 W"
    assert gpu.findtext("gpu_power_readings/requested_power_limit") == "1400.00 W"
    assert gpu.findtext("gpu_power_readings/max_power_limit") == "1400.00 W"
    section = gpu.find("clocks_event_reasons")
    assert section is not None
    reasons = {e.tag.removeprefix("clocks_event_reason_"): e.text for e in section}
    active = {name for name, text in reasons.items() if text == "Active"}
    # HW Slowdown comes with a HW thermal slowdown, as on the real 8xH100 capture
    assert active == {"sw_thermal_slowdown", "hw_thermal_slowdown", "hw_slowdown"}
    assert gpus[0].findtext("persistence_mode") == "Enabled"
    assert gpus[0].findtext("fan_speed") == "N/A"


def test_output_is_deterministic_but_for_the_timestamp(smi: Run, h100: Path) -> None:
    def strip(text: str) -> str:
        return re.sub(r"(<timestamp>|Timestamp +: ).*", "", text)

    for args in (["-q", "-x"], ["-q"], ["topo", "-m"]):
        assert strip(smi(h100, *args)[1]) == strip(smi(h100, *args)[1])


# ----------------------------------------------------------------- -q (text)


def text_skeleton(text: str) -> list[str]:
    """Labels with their padding and indent, values dropped; GPU headers without the bus id."""
    lines = []
    for line in text.split("\n"):
        line = re.sub(r"^GPU [0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-9A-F]$", "GPU <bus id>", line)
        lines.append(line.split(" : ")[0] + " :" if " : " in line else line)
    return lines


def test_text_matches_the_590_layout_line_for_line(
    smi: Run, h100: Path, read_fixture: Callable[[str], str]
) -> None:
    rc, out = smi(h100, "-q", "-i", "0")
    assert rc == 0
    real = read_fixture(IDLE_Q)
    # the capture is a slice of a bundle and lost the blank line every GPU block ends with
    assert text_skeleton(out) == text_skeleton(real + "\n")


def test_text_multi_gpu_blocks_like_the_8xh100_capture(
    smi: Run, h100: Path, read_fixture: Callable[[str], str]
) -> None:
    _, out = smi(h100, "-q")
    real = read_fixture(MULTI_Q)
    headers = [line for line in out.splitlines() if line.startswith("GPU ")]
    assert headers == [f"GPU {g['pci_bus_id']}" for g in state.present_gpus(state.load(h100))]
    assert len(headers) == len([line for line in real.splitlines() if line.startswith("GPU ")])
    # a blank line closes each GPU block, so every later header follows one, as in the capture
    for text in (out, real):
        lines = text.split("\n")
        starts = [i for i, line in enumerate(lines) if line.startswith("GPU 0000")]
        assert lines[starts[0] - 1].startswith("Attached GPUs") and all(
            lines[i - 1] == "" for i in starts[1:]
        )
    assert out.endswith("\n\n")
    assert re.search(r"\nAttached GPUs +: 8\n", out)


def test_text_selected_gpu_and_values(smi: Run, b300: Path) -> None:
    def change(current: state.State) -> None:
        state.present_gpus(current)[5]["clocks_event_reasons"] = ["hw_power_brake_slowdown"]

    edit(b300, change)
    target = state.present_gpus(state.load(b300))[5]
    for ident in ("5", target["uuid"], target["pci_bus_id"], target["pci_bus_id"][4:]):
        _, out = smi(b300, "-q", "-i", ident)
        assert [line for line in out.splitlines() if line.startswith("GPU ")] == [
            f"GPU {target['pci_bus_id']}"
        ]
        assert "Attached GPUs                                          : 16" in out
    assert "            HW Power Brake Slowdown                    : Active" in out
    assert "        HW Slowdown                                    : Active" in out
    assert "        Idle                                           : Not Active" in out
    assert "        GPU T.Limit Temp                               : 54 C" in out


def labels(block: str) -> list[str]:
    return [line.split(" : ")[0].strip() for line in block.splitlines() if line.strip()]


def test_text_display_power_has_the_real_sections(
    smi: Run, h100: Path, read_fixture: Callable[[str], str]
) -> None:
    rc, out = smi(h100, "-q", "-d", "POWER", "-i", "1")
    assert rc == 0
    real = read_fixture(POWER_Q)
    first_real = real.split("\nGPU ")[1].split("\n\n")[0]
    first_mine = out.split("\nGPU ")[1].split("\n\n")[0]
    assert labels(first_mine)[1:] == labels(first_real)[1:]  # after the "GPU <bus id>" line
    assert "        Current Power Limit                            : 700.00 W" in out
    assert "Temperature" not in out


def test_text_display_types_combine_and_unknown_is_refused(smi: Run, h100: Path) -> None:
    _, out = smi(h100, "-q", "-d", "TEMPERATURE,PERFORMANCE", "-i", "0")
    sections = [
        line.strip() for line in out.splitlines() if line.startswith("    ") and not line.startswith("     ")
    ]
    assert [s.split(" : ")[0].strip() for s in sections] == [
        "Performance State",
        "Clocks Event Reasons",
        "Clocks Event Reasons Counters",
        "Temperature",
    ]
    rc, out = smi(h100, "-q", "-d", "BOGUS")
    assert (rc, out) == (2, "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n")
    rc, _ = smi(h100, "-q", "-x", "-d", "POWER")  # -d "doesn't work with -x" (nvidia-smi -h)
    assert rc == 2


# ----------------------------------------------------------------- --query-gpu


def real_csv_headers(read_fixture: Callable[[str], str]) -> dict[str, str]:
    command = next(line for line in read_fixture(FULL).splitlines() if "--query-gpu=timestamp" in line)
    fields = command.split("--query-gpu=")[1].split(" ")[0].split(",")
    header, row = read_fixture(CSV).splitlines()[:2]
    headers, values = header.split(", "), row.split(", ")
    assert len(fields) == len(headers) == len(values)
    return dict(zip(fields, headers, strict=True))


BRIEF_FIELDS = (
    "index,uuid,name,pci.bus_id,serial,persistence_mode,driver_version,power.draw,power.limit,"
    "enforced.power.limit,power.default_limit,power.min_limit,power.max_limit,power.draw.average,"
    "power.draw.instant,temperature.gpu,temperature.memory,temperature.gpu.tlimit,utilization.gpu,"
    "memory.total,memory.used,clocks.current.sm,clocks.max.sm,clocks_event_reasons.active,"
    "clocks_event_reasons.hw_slowdown,clocks_event_reasons.sw_thermal_slowdown,"
    "clocks_event_reasons.hw_thermal_slowdown,clocks_event_reasons.hw_power_brake_slowdown,"
    "clocks_event_reasons.sw_power_cap,clocks_event_reasons.gpu_idle,pstate,"
    "ecc.errors.uncorrected.volatile.total,ecc.errors.uncorrected.aggregate.total"
)


def test_csv_header_is_the_real_header_for_every_field_both_know(
    smi: Run, h100: Path, read_fixture: Callable[[str], str]
) -> None:
    real = real_csv_headers(read_fixture)
    from gpufleet_sim.tools.nvsmi_csv import FIELDS

    shared = [f.names[0] for f in FIELDS if f.names[0] in real]
    assert set(BRIEF_FIELDS.split(",")) <= set(shared)
    rc, out = smi(h100, f"--query-gpu={','.join(shared)}", "--format=csv", "-i", "0")
    assert rc == 0
    header, row = out.splitlines()
    assert header.split(", ") == [real[f] for f in shared]
    # a value carries its unit exactly when the real one does, and [N/A]-style markers match
    real_values = dict(zip(real, read_fixture(CSV).splitlines()[1].split(", "), strict=True))
    for name, value in zip(shared, row.split(", "), strict=True):
        if name in ("timestamp", "pcie.link.gen.hostmax"):  # hostmax is [N/A] only because that H100 is a VM
            continue
        expected = real_values[name]
        assert value.startswith("[") == expected.startswith("["), name
        assert value.split(" ")[-1] == expected.split(" ")[-1] or " " not in expected, name


def test_csv_rows_units_noheader_and_aliases(smi: Run, b300: Path) -> None:
    rc, out = smi(
        b300, "--query-gpu=index,power.limit,memory.total,clocks_event_reasons.active", "--format=csv"
    )
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == "index, power.limit [W], memory.total [MiB], clocks_event_reasons.active"
    assert lines[1] == "0, 1400.00 W, 275040 MiB, 0x0000000000000001"
    assert len(lines) == 17
    _, out = smi(
        b300, "--query-gpu=index,power.limit,memory.total", "--format=csv,noheader,nounits", "-i", "3,1"
    )
    assert out == "3, 1400.00, 275040\n1, 1400.00, 275040\n"
    # an alias prints under its canonical name, as in NVIDIA's own example (gpu_name -> name)
    _, out = smi(
        b300,
        "--query-gpu=gpu_name,gpu_bus_id,clocks.sm,clocks_throttle_reasons.active",
        "--format=csv",
        "-i",
        "0",
    )
    assert out.splitlines()[0] == "name, pci.bus_id, clocks.current.sm [MHz], clocks_event_reasons.active"
    _, out = smi(b300, "--query-gpu=fan.speed,temperature.gpu", "--format=csv,nounits", "-i", "0")
    assert out == "fan.speed [%], temperature.gpu\n[N/A], 31\n"


def test_csv_reasons_bitmask_and_flags(smi: Run, h100: Path) -> None:
    def change(current: state.State) -> None:
        state.present_gpus(current)[0]["clocks_event_reasons"] = ["sw_power_cap", "hw_power_brake_slowdown"]

    edit(h100, change)
    fields = (
        "clocks_event_reasons.active,clocks_event_reasons.hw_slowdown,clocks_event_reasons.sw_power_cap,"
        "clocks_event_reasons.gpu_idle,clocks_event_reasons.hw_power_brake_slowdown"
    )
    _, out = smi(h100, f"--query-gpu={fields}", "--format=csv,noheader", "-i", "0")
    assert out == "0x000000000000008C, Active, Active, Not Active, Active\n"  # 0x80 | 0x08 | 0x04


def test_csv_unknown_field_and_format_errors(smi: Run, h100: Path) -> None:
    rc, out = smi(h100, "--query-gpu=index,foo", "--format=csv")
    assert (rc, out) == (2, 'Field "foo" is not a valid field to query.\n\n')
    rc, out = smi(h100, "--query-gpu=index")
    assert rc == 2 and out.startswith('"--format=" switch is missing.')
    rc, _ = smi(h100, "--query-gpu=index", "--format=json")
    assert rc == 2


# ----------------------------------------------------------------- -L and -i


def test_list_matches_the_real_line(smi: Run, h100: Path, read_fixture: Callable[[str], str]) -> None:
    real = next(line for line in read_fixture(FULL).splitlines() if line.startswith("GPU 0: "))
    shape = re.compile(r"^GPU (\d+): (.+) \(UUID: (GPU-[0-9a-f-]{36})\)$")
    assert shape.match(real)
    _, out = smi(h100, "-L")
    gpus = state.present_gpus(state.load(h100))
    assert out == "".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: {g['uuid']})\n" for i, g in enumerate(gpus))
    _, out = smi(h100, "-L", "-i", "6")
    assert out == f"GPU 6: NVIDIA H100 80GB HBM3 (UUID: {gpus[6]['uuid']})\n"


@pytest.mark.parametrize(
    "ident", ["8", "GPU-00000000-0000-0000-0000-000000000000", "00000000:FF:00.0", "abc"]
)
def test_unknown_id_is_no_devices_found(smi: Run, h100: Path, ident: str) -> None:
    for args in (
        ["-L"],
        ["-q"],
        ["-q", "-x"],
        ["--query-gpu=index", "--format=csv"],
        ["-pm", "1"],
        ["-pl", "500"],
    ):
        assert smi(h100, *args, "-i", ident) == (6, "No devices were found\n")


def test_no_gpu_present_is_no_devices_found(smi: Run, h100: Path) -> None:
    def fall_off(current: state.State) -> None:
        for gpu in current["gpus"]:
            gpu["present"] = False

    edit(h100, fall_off)
    for args in (["-L"], ["-q"], ["-q", "-x"], ["--query-gpu=uuid", "--format=csv"], ["topo", "-m"]):
        assert smi(h100, *args) == (6, "No devices were found\n")


def test_missing_gpu_and_swapped_bus_order_change_the_index(smi: Run, h100: Path) -> None:
    before = state.present_gpus(state.load(h100))

    def change(current: state.State) -> None:
        first = next(g for g in current["gpus"] if g["slot"] == 0)
        second = next(g for g in current["gpus"] if g["slot"] == 1)
        first["pci_bus_id"], second["pci_bus_id"] = second["pci_bus_id"], first["pci_bus_id"]
        next(g for g in current["gpus"] if g["slot"] == 7)["present"] = False

    edit(h100, change)
    _, out = smi(h100, "--query-gpu=index,uuid,pci.bus_id,count", "--format=csv,noheader")
    rows = [line.split(", ") for line in out.splitlines()]
    assert [r[1] for r in rows[:2]] == [before[1]["uuid"], before[0]["uuid"]]
    assert [r[2] for r in rows[:2]] == [before[0]["pci_bus_id"], before[1]["pci_bus_id"]]
    assert len(rows) == 7 and {r[3] for r in rows} == {"7"}


# ----------------------------------------------------------------- -pm / -pl


def test_persistence_mode(smi: Run, h100: Path) -> None:
    bus = [g["pci_bus_id"] for g in state.present_gpus(state.load(h100))]
    rc, out = smi(h100, "-pm", "0", "-i", "3")
    assert (rc, out) == (0, f"Disabled persistence mode for GPU {bus[3]}.\nAll done.\n")
    modes = [g["persistence_mode"] for g in state.present_gpus(state.load(h100))]
    assert modes == [True, True, True, False, True, True, True, True]
    rc, out = smi(h100, "--persistence-mode=DISABLED", "-i", "3")
    assert out == f"Persistence mode is already Disabled for GPU {bus[3]}.\nAll done.\n"
    rc, out = smi(h100, "-pm", "1")
    lines = out.splitlines()
    assert lines[3] == f"Enabled persistence mode for GPU {bus[3]}."
    assert lines[0] == f"Persistence mode is already Enabled for GPU {bus[0]}." and lines[-1] == "All done."
    assert all(g["persistence_mode"] for g in state.present_gpus(state.load(h100)))
    assert smi(h100, "-pm", "2")[0] == 2
    _, out = smi(h100, "-pm", "0")
    _, out = smi(h100, "--query-gpu=persistence_mode", "--format=csv,noheader", "-i", "0")
    assert out == "Disabled\n"


def test_power_limit_sets_requested_and_enforced(smi: Run, b300: Path) -> None:
    def cap(current: state.State) -> None:  # the power-capped fault: enforced 300 W under the request
        for gpu in current["gpus"]:
            gpu["power"]["enforced_limit_w"] = 1100.0

    edit(b300, cap)
    bus = gpu0(b300)["pci_bus_id"]
    rc, out = smi(b300, "-pl", "1400", "-i", "0")
    assert (rc, out) == (0, f"Power limit for GPU {bus} was set to 1400.00 W from 1100.00 W.\nAll done.\n")
    power = [g["power"] for g in state.present_gpus(state.load(b300))]
    assert (power[0]["requested_limit_w"], power[0]["enforced_limit_w"]) == (1400.0, 1400.0)
    assert power[1]["enforced_limit_w"] == 1100.0
    rc, out = smi(b300, "--power-limit=1250.5")
    assert rc == 0 and len(out.splitlines()) == 17
    assert {g["power"]["enforced_limit_w"] for g in state.present_gpus(state.load(b300))} == {1250.5}
    _, out = smi(b300, "--query-gpu=power.limit,enforced.power.limit", "--format=csv,noheader", "-i", "0")
    assert out == "1250.50 W, 1250.50 W\n"


def test_power_limit_out_of_range_changes_nothing(smi: Run, b300: Path) -> None:
    before = state.load(b300)
    bus = gpu0(b300)["pci_bus_id"]
    rc, out = smi(b300, "-pl", "2000")
    assert rc == 2
    assert out == (
        f"Provided power limit 2000.00 W is not a valid power limit which should be between 200.00 W and "
        f"1400.00 W for GPU {bus}\nTerminating early due to previous errors.\n"
    )
    assert state.load(b300) == before
    assert smi(b300, "-pl", "150", "-i", "0")[0] == 2
    assert smi(b300, "-pl", "lots")[0] == 2
    assert state.load(b300) == before


# ----------------------------------------------------------------- topo -m


def topo_shape(text: str) -> list[str]:
    """Each line as its kind: header, GPU row (with its affinity tail), NIC row, or literal text."""
    shape = []
    for line in text.split("\n"):
        if line.startswith("\t\x1b[4mGPU0\t") and line.endswith(
            "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m"
        ):
            shape.append("header")
        elif re.match(r"^GPU\d+\t", line):
            assert re.search(r"\t[\d,\-]*\t\d+\t\tN/A$", line), line
            shape.append("gpu")
        elif re.match(r"^NIC\d+\t", line):
            assert line.endswith("\t\t\t\t"), line
            shape.append("nic")
        elif re.match(r"^  NIC\d+: mlx5_\d+$", line):
            shape.append("nic legend")
        else:
            shape.append(line)
    collapsed: list[str] = []
    for kind in shape:
        if not collapsed or kind not in ("gpu", "nic", "nic legend") or collapsed[-1] != kind:
            collapsed.append(kind)
    return collapsed


def test_topo_layout_is_the_gb200_capture_layout(
    smi: Run, b300: Path, read_fixture: Callable[[str], str]
) -> None:
    rc, out = smi(b300, "topo", "-m")
    assert rc == 0
    assert topo_shape(out) == topo_shape(read_fixture(GB200_TOPO))
    header = out.split("\n")[0]
    columns = header.strip("\t").removeprefix("\x1b[4m").removesuffix("\x1b[0m").split("\t")
    assert columns == [f"GPU{i}" for i in range(16)] + [f"NIC{i}" for i in range(8)] + [
        "CPU Affinity",
        "NUMA Affinity",
        "GPU NUMA ID",
    ]
    for line in out.split("\n")[1:25]:
        assert len(line.split("\t")) == 1 + 24 + 4


def test_topo_cells_follow_nvlink_domains_switches_and_numa(smi: Run, b300: Path) -> None:
    _, out = smi(b300, "topo", "-m")
    rows = {line.split("\t")[0]: line.split("\t")[1:] for line in out.split("\n")[1:25]}
    gpu0_row, nic0_row = rows["GPU0"], rows["NIC0"]
    assert gpu0_row[0] == " X " and gpu0_row[1:8] == ["NV18"] * 7 and gpu0_row[8:16] == ["SYS"] * 8
    assert gpu0_row[16:24] == ["PIX", "NODE", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"]
    assert gpu0_row[24:] == ["0-55,112-167", "0", "", "N/A"]
    assert rows["GPU9"][24:] == ["56-111,168-223", "1", "", "N/A"]
    assert nic0_row[:2] == ["PIX", "PIX"] and nic0_row[16] == " X " and nic0_row[17] == "NODE"
    assert nic0_row[20] == "SYS"
    assert out.endswith("\nNIC Legend:\n\n" + "".join(f"  NIC{i}: mlx5_{i}\n" for i in range(8)) + "\n")


def test_topo_h100_single_domain_and_bad_arguments(smi: Run, h100: Path) -> None:
    _, out = smi(h100, "topo", "-m")
    rows = [line.split("\t") for line in out.split("\n")[1:9]]
    assert all(cell in (" X ", "NV18") for row in rows for cell in row[1:9])
    assert smi(h100, "topo")[0] == 2 and smi(h100, "topo", "-x")[0] == 2


# ----------------------------------------------------------------- arguments


def test_argument_errors_use_the_real_wording(smi: Run, h100: Path) -> None:
    assert smi(h100, "-format=csv") == (
        2,
        "ERROR: Option -format=csv is not recognized. Please run 'nvidia-smi -h' for help.\n\n",
    )
    assert smi(h100, "-q", "-i") == (
        2,
        "ERROR: Option -i is missing its value. Please run 'nvidia-smi -h' for help.\n\n",
    )
    invalid = (2, "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n")
    assert smi(h100, "-L", "-q") == invalid
    assert smi(h100, "-x") == invalid
    assert smi(h100, "-L", "--format=csv") == invalid


def test_version(smi: Run, h100: Path) -> None:
    assert smi(h100, "--version") == (
        0,
        "NVIDIA-SMI version  : 535.161.08\nNVML version        : 535.161\n"
        "DRIVER version      : 535.161.08\nCUDA Version        : 12.2\n",
    )


NODE_PYTHON = "/usr/bin/python3"  # what runs the tools inside a node: 3.11, stdlib only


def test_runs_on_the_node_python_with_the_stdlib_only(b300: Path, tmp_path: Path) -> None:
    src = Path(nvidia_smi.__file__).resolve().parents[2]
    script = (
        "import sys; from pathlib import Path; sys.modules['yaml'] = None\n"
        "from gpufleet_sim.tools import nvidia_smi\n"
        "sys.exit(nvidia_smi.main(sys.argv[2:], Path(sys.argv[1])))\n"
    )
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(src)}
    for args in (
        ["-q", "-x"],
        ["-q"],
        ["-q", "-d", "POWER"],
        ["topo", "-m"],
        ["-L"],
        ["-pm", "1"],
        ["-pl", "1400"],
        ["--query-gpu=" + BRIEF_FIELDS, "--format=csv"],
    ):
        done = subprocess.run(
            [
                NODE_PYTHON,
                "-I",
                "-c",
                f"import sys; sys.path.insert(0, {str(src)!r})\n" + script,
                str(b300),
                *args,
            ],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert (done.returncode, done.stderr) == (0, ""), args


# ----------------------------------------------------------------- through the real parsers


@pytest.fixture(scope="module")
def parsers() -> ModuleType:
    # tests/conftest.py put the checkout's collection on sys.path.
    return importlib.import_module("ansible_collections.gpufleet.node.plugins.module_utils.gpu.nvidia_smi")


def degrade(node_dir: Path) -> None:
    """A hot, capped, half-configured GPU 2 so the round trip checks more than defaults."""

    def change(current: state.State) -> None:
        gpu = state.present_gpus(current)[2]
        gpu["temperature"].update(gpu_c=91, memory_c=95)
        gpu["power"].update(enforced_limit_w=1100.0, draw_w=1098.5)
        gpu["persistence_mode"] = False
        gpu["clocks_event_reasons"] = ["sw_power_cap", "hw_thermal_slowdown"]
        gpu["ecc"] = {"volatile_uncorrected": 2, "aggregate_uncorrected": 5}
        gpu["remapped_rows"].update(pending=True)

    edit(node_dir, change)


def expected_gpus(node_dir: Path) -> list[dict[str, Any]]:
    out = []
    for index, gpu in enumerate(state.present_gpus(state.load(node_dir))):
        temp, power = gpu["temperature"], gpu["power"]
        reasons = set(gpu["clocks_event_reasons"])
        if reasons & {"hw_thermal_slowdown", "hw_power_brake_slowdown"}:
            reasons.add("hw_slowdown")
        out.append(
            {
                "index": index,
                "uuid": gpu["uuid"],
                "pci_bus_id": gpu["pci_bus_id"],
                "name": gpu["name"],
                "serial": gpu["serial"],
                "persistence_mode": gpu["persistence_mode"],
                "mig_mode": False,
                "power": {
                    k: power[k]
                    for k in (
                        "requested_limit_w",
                        "enforced_limit_w",
                        "default_limit_w",
                        "min_limit_w",
                        "max_limit_w",
                        "draw_w",
                    )
                },
                "temperature": {
                    "gpu_c": temp["gpu_c"],
                    "memory_c": temp["memory_c"],
                    "tlimit_c": temp["max_operating_c"] - temp["gpu_c"],
                },
                "reasons": reasons,
                "ecc": gpu["ecc"],
                "remapped_rows": {
                    "pending": gpu["remapped_rows"]["pending"],
                    "failure": gpu["remapped_rows"]["failure"],
                },
            }
        )
    return out


def comparable(parsed: dict[str, Any]) -> dict[str, Any]:
    gpu = dict(parsed)
    gpu["reasons"] = set(gpu.pop("clocks_event_reasons"))
    for key in ("module_power", "retired_pages"):
        gpu.pop(key)
    return gpu


@pytest.mark.parametrize("args", [["-q", "-x"], ["-q"]])
def test_query_round_trips_through_the_parsers(
    parsers: ModuleType, smi: Run, b300: Path, args: list[str]
) -> None:
    degrade(b300)
    parse = parsers.parse_query_xml if "-x" in args else parsers.parse_query_text
    report = parse(smi(b300, *args)[1])
    assert (report["driver_version"], report["cuda_version"], report["attached_gpus"]) == (
        "580.95.05",
        "13.0",
        16,
    )
    assert [comparable(g) for g in report["gpus"]] == expected_gpus(b300)
    assert report["gpus"][2]["module_power"]["enforced_limit_w"] is None  # N/A stays unknown


def test_power_display_round_trips(parsers: ModuleType, smi: Run, b300: Path) -> None:
    degrade(b300)
    report = parsers.parse_query_text(smi(b300, "-q", "-d", "POWER", "-i", "2")[1], partial=True)
    assert report["attached_gpus"] == 16 and len(report["gpus"]) == 1
    assert report["gpus"][0]["power"] == expected_gpus(b300)[2]["power"]


def test_csv_round_trips(parsers: ModuleType, smi: Run, b300: Path) -> None:
    degrade(b300)
    fields = BRIEF_FIELDS.split(",")
    for fmt in ("csv", "csv,nounits"):
        rows = parsers.parse_query_csv(smi(b300, f"--query-gpu={BRIEF_FIELDS}", f"--format={fmt}")[1])
        hot = rows[2]
        assert hot["uuid"] == expected_gpus(b300)[2]["uuid"] and hot["index"] == 2
        assert (hot["power.limit"], hot["enforced.power.limit"], hot["power.draw"]) == (
            1400.0,
            1100.0,
            1098.5,
        )
        assert (hot["temperature.gpu"], hot["temperature.gpu.tlimit"], hot["temperature.memory"]) == (
            91,
            -6,
            95,
        )
        assert hot["clocks_event_reasons.active"] == "0x000000000000004C"  # 0x40 | 0x08 | 0x04
        assert hot["clocks_event_reasons.hw_thermal_slowdown"] in ("Active", True)
        assert hot["persistence_mode"] in ("Disabled", False)
        assert hot["ecc.errors.uncorrected.volatile.total"] == 2
        assert list(hot) == fields
    noheader = smi(b300, f"--query-gpu={BRIEF_FIELDS}", "--format=csv,noheader,nounits")[1]
    assert parsers.parse_query_csv(noheader, fields=fields)[2]["power.limit"] == 1400.0


def test_list_and_topo_round_trip(parsers: ModuleType, smi: Run, b300: Path) -> None:
    gpus = state.present_gpus(state.load(b300))
    listed = parsers.parse_list(smi(b300, "-L")[1])
    assert [(g["index"], g["uuid"], g["name"]) for g in listed] == [
        (i, g["uuid"], g["name"]) for i, g in enumerate(gpus)
    ]
    topo = parsers.parse_topo_matrix(smi(b300, "topo", "-m")[1], gpu_count=16)
    assert topo["nic_legend"] == {f"NIC{i}": f"mlx5_{i}" for i in range(8)}
    assert topo["numa_affinity"] == {f"GPU{i}": g["numa_node"] for i, g in enumerate(gpus)}
    assert topo["cpu_affinity"]["GPU12"] == "56-111,168-223"
    assert set(topo["gpu_numa_id"].values()) == {None}
    assert parsers.nvlink_domains(topo) == [[f"GPU{i}" for i in range(8)], [f"GPU{i}" for i in range(8, 16)]]
    assert parsers.nearest_nics(topo, "GPU3") == ["mlx5_1"]
    xml = parsers.parse_query_xml(smi(b300, "-q", "-x")[1])
    topology, warnings = parsers.build_topology(xml["gpus"], topo)
    assert warnings == [] and len(topology["nvlink_domains"]) == 2
    assert json.dumps(topology)  # plain data all the way down


def test_tool_writes_nothing_outside_its_node_dir(smi: Run, b300: Path) -> None:
    smi(b300, "-pl", "1300")
    assert sorted(p.name for p in b300.iterdir()) == ["state.json", "state.lock"]


def test_power_sample_round_trips(parsers: ModuleType, smi: Run, b300: Path) -> None:
    """gpu_power's one CSV query reads what -q -x reads of persistence and the power limits."""
    degrade(b300)
    sample = parsers.parse_power_sample(smi(b300, *parsers.power_query("nvidia-smi")[1:])[1])
    full = parsers.parse_query_xml(smi(b300, "-q", "-x")[1])["gpus"]
    assert len(sample) == 16
    for row, gpu in zip(sample, full, strict=True):
        assert (row["uuid"], row["pci_bus_id"], row["persistence_mode"]) == (
            gpu["uuid"],
            gpu["pci_bus_id"],
            gpu["persistence_mode"],
        )
        assert row["power"] == {k: v for k, v in gpu["power"].items() if k != "draw_w"}
    assert (sample[2]["persistence_mode"], sample[2]["power"]["enforced_limit_w"]) == (False, 1100.0)


def test_the_oversized_field_fault_is_a_2_mib_product_name_in_the_xml_only(smi: Run, b300: Path) -> None:
    """nvsmi-oversized-field: -q -x prints the first GPU's product name 2 MiB long, still well-formed XML;
    the other GPUs, the other queries and, once cleared, the XML are as before."""
    before = {args: smi(b300, *args)[1] for args in (("-q", "-x"), ("-L",))}
    assert faults.inject(b300, "nvsmi-oversized-field")
    rc, out = smi(b300, "-q", "-x")
    assert rc == 0
    names = [
        e.text or "" for e in ET.fromstring(re.sub(r"<(\?xml|!DOCTYPE)[^>]*>", "", out)).iter("product_name")
    ]
    assert len(names[0]) == faults_tools.OVERSIZED_FIELD_CHARS and names[0].startswith("NVIDIA B300")
    assert names[1:] == ["NVIDIA B300 SXM6 AC"] * 15
    assert smi(b300, "-L")[1] == before[("-L",)]
    assert faults.clear(b300, "nvsmi-oversized-field") == ["nvsmi-oversized-field"]
    timestamp = re.compile(r"<timestamp>.*</timestamp>")
    assert timestamp.sub("", smi(b300, "-q", "-x")[1]) == timestamp.sub("", before[("-q", "-x")])
