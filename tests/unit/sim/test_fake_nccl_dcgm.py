"""The simulated nccl-tests `all_reduce_perf` and `dcgmi diag` (issue 25), read back with the parsers the
node's modules use (nccl_tests.parse_all_reduce, dcgm.parse_diag_json).

A fleet directory in tmp_path: node01 of each profile (sim/build.py, its sysfs rendered) and the b300-16
node's two leaves (sim/nvue.prepare), so that a switch fault on one leaf reaches the node's ports' paths.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import dcgm
from ansible_collections.gpufleet.node.plugins.module_utils.nccl import nccl_tests
from gpufleet_sim import build, faults, faults_switch, nccl_model, node, nvue, state, sysfs, thermal
from gpufleet_sim.tools import all_reduce_perf, dcgmi

from tests.unit.sim.fake_node import copy_node, node_fixture, run

FIXTURE = (
    Path(__file__).parents[2] / "fixtures" / "real" / "nccl-tests" / "azure-nd-h200-v5-8gpu-all-reduce-8g.txt"
)
LARGE = ("-b", "1G", "-e", "8G", "-f", "2")
SWEEP = ("-b", "8", "-e", "8G", "-f", "2")
# the large-buffer busbw each profile's healthy ring reaches (GB/s; sim/nccl_model.py)
HEALTHY = {"b300-16": 170.0, "h100-8": 478.1}


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The tools' waits recorded instead of slept."""
    waited: list[float] = []
    monkeypatch.setattr(all_reduce_perf, "pause", waited.append)
    monkeypatch.setattr(dcgmi, "pause", waited.append)
    return waited


def build_fleet(root: Path, profile: str) -> Path:
    node_dir = root / "nodes" / "node01"
    node_dir.mkdir(parents=True)
    built = build.build_node_state("node01", profile, 1)
    state.save(node_dir, built)
    sysfs.render(node_dir / "sys", built)
    if profile == "b300-16":
        for leaf in ("leaf01", "leaf02"):
            nvue.prepare(root / "leaves", leaf, "127.0.0.2", ports=build.LEAF_PORTS)
    return node_dir


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each profile's fleet directory built once; each test works on a copy."""
    out = {}
    for profile in ("b300-16", "h100-8"):
        root = tmp_path_factory.mktemp(profile)
        build_fleet(root, profile)
        out[profile] = root
    return out


b300 = node_fixture("b300-16", "templates", "nodes/node01")
h100 = node_fixture("h100-8", "templates", "nodes/node01")


def all_reduce(node_dir: Path, *argv: str) -> dict[str, Any]:
    rc, out, err = run(all_reduce_perf, node_dir, *argv)
    assert rc == 0, out + err
    parsed: dict[str, Any] = nccl_tests.parse_all_reduce(out)
    return parsed


def large_busbw(node_dir: Path, gpus: int) -> float:
    parsed = all_reduce(node_dir, *LARGE, "-g", str(gpus))
    busbw: float = parsed["avg_busbw_gbps"]
    return busbw


# ------------------------------------------------------------------ all_reduce_perf


def test_the_output_is_nccl_tests_format_line_for_line(h100: Path) -> None:
    rc, out, _ = run(all_reduce_perf, h100, "-b", "8G", "-e", "8G", "-f", "2", "-g", "8", "-c", "1")
    assert rc == 0
    real = FIXTURE.read_text().splitlines()
    ours = out.splitlines()
    # the table header and the closing lines as the real capture (trailing blanks aside)
    start = ours.index(next(line for line in ours if line.startswith("NCCL version")))
    assert [line.rstrip() for line in ours[start + 1 : start + 5]] == real[12:16]
    assert ours[start] == "NCCL version 2.19.3+cuda12.2" == real[11]
    # the real header with -g 8 in one process and nccl-tests' default 20 iterations
    assert ours[0] == real[0].replace("nGpus 1", "nGpus 8").replace("iters: 10", "iters: 20")
    assert ours[start + 6] == "# Out of bounds values : 0 OK"
    assert re.fullmatch(r"# Avg bus bandwidth    : [0-9.]+ ", ours[start + 7])
    # the one row lines up with the real one, column for column, and close to its figures
    row, real_row = ours[start + 5], real[16]
    assert [m.end() for m in re.finditer(r"\S+", row)] == [m.end() for m in re.finditer(r"\S+", real_row)]
    parsed = nccl_tests.parse_all_reduce(out)
    assert parsed["rows"][0]["out_of_place"]["busbw_gbps"] == pytest.approx(476.96, rel=0.01)
    assert parsed["rows"][0]["out_of_place"]["time_us"] == pytest.approx(31517, rel=0.01)
    assert [d["device"] for d in parsed["devices"]] == list(range(8))
    buses = [int(g["pci_bus_id"].split(":")[1], 16) for g in state.present_gpus(state.load(h100))]
    assert [d["bus_id"] for d in parsed["devices"]] == [f"0x{bus:02x}" for bus in buses]
    assert {d["host"] for d in parsed["devices"]} == {"node01"}
    assert {d["name"] for d in parsed["devices"]} == {"NVIDIA H100 80GB HBM3"}


@pytest.mark.parametrize("profile", ["b300-16", "h100-8"])
def test_a_healthy_node_reaches_its_profiles_bus_bandwidth(
    templates: dict[str, Path], tmp_path: Path, profile: str
) -> None:
    node_dir = copy_node(templates, tmp_path / "fleet", profile, "nodes/node01")
    gpus = len(state.load(node_dir)["gpus"])
    parsed = all_reduce(node_dir, *SWEEP, "-g", str(gpus))
    assert len(parsed["rows"]) == 31 and len(parsed["devices"]) == gpus
    assert parsed["bounds_ok"] is True and parsed["wrong_rows"] == []
    assert parsed["max_busbw_gbps"] == pytest.approx(HEALTHY[profile], rel=0.01)
    # small sizes are latency-bound: the sweep's average is far below the large sizes'
    assert parsed["rows"][0]["out_of_place"]["busbw_gbps"] == 0.0
    assert parsed["avg_busbw_gbps"] < 0.5 * parsed["max_busbw_gbps"]
    busbws = [r["in_place"]["busbw_gbps"] for r in parsed["rows"]] + [
        r["out_of_place"]["busbw_gbps"] for r in parsed["rows"]
    ]
    assert parsed["avg_busbw_gbps"] == pytest.approx(sum(busbws) / len(busbws), abs=0.01)
    assert large_busbw(node_dir, gpus) == pytest.approx(HEALTHY[profile], rel=0.02)


@pytest.mark.parametrize(
    ("fault", "share"),
    [
        ("link-down", 0.75),  # 3 of board 1's 4 ports
        ("pfc-off", nccl_model.LOSSY_SHARE),
        ("ecn-off", nccl_model.NO_CONGESTION_CONTROL_SHARE),
        ("pcie-degraded", (150 + 2) / 200),  # GPU 3 at Gen1 x8 feeds its switch's NIC 2 GB/s
        ("nccl-slow", 0.25),
    ],
)
def test_each_degraded_path_lowers_the_b300_busbw_by_itself(b300: Path, fault: str, share: float) -> None:
    healthy = large_busbw(b300, 16)
    faults.inject(b300, fault)
    assert large_busbw(b300, 16) == pytest.approx(healthy * share, rel=0.02)
    faults.clear(b300, fault)
    assert large_busbw(b300, 16) == pytest.approx(healthy, rel=0.01)


def test_a_switch_fault_on_one_leaf_lowers_the_busbw_of_the_board_behind_it(b300: Path) -> None:
    healthy = large_busbw(b300, 16)
    leaf01 = b300.parent.parent / "leaves" / "leaf01.json"
    assert faults_switch.inject_leaf(leaf01, "switch-ecn-off")
    assert large_busbw(b300, 16) == pytest.approx(healthy * nccl_model.NO_CONGESTION_CONTROL_SHARE, rel=0.02)
    faults_switch.clear_leaf(leaf01, "switch-ecn-off")
    assert faults_switch.inject_leaf(leaf01, "switch-pfc-off")
    assert large_busbw(b300, 16) == pytest.approx(healthy * nccl_model.LOSSY_SHARE, rel=0.02)


def test_one_board_of_the_b300_runs_on_nvlink_alone(b300: Path) -> None:
    faults.inject(b300, "link-down")
    assert large_busbw(b300, 8) == pytest.approx(18 * 53.125, rel=0.02)


@pytest.mark.parametrize(
    ("fault", "share"), [("nvlink-down", 17 / 18), ("nccl-slow", 0.25), ("link-down", 1.0)]
)
def test_the_h100_nvlink_ring_drops_with_a_dead_link_and_not_with_a_roce_port(
    h100: Path, fault: str, share: float
) -> None:
    healthy = large_busbw(h100, 8)
    faults.inject(h100, fault)
    assert large_busbw(h100, 8) == pytest.approx(healthy * share, rel=0.02)


def test_more_gpus_than_present_fail_with_cudas_error(b300: Path) -> None:
    rc, out, _ = run(all_reduce_perf, b300, *LARGE, "-g", "17")
    assert rc == 2 and "node01: Test CUDA failure common.cu:" in out and "'invalid device ordinal'" in out
    with pytest.raises(nccl_tests.ParseError):
        nccl_tests.parse_all_reduce(out)
    faults.inject(b300, "xid-79")
    assert run(all_reduce_perf, b300, *LARGE, "-g", "16")[0] == 2
    assert len(all_reduce(b300, *LARGE, "-g", "15")["devices"]) == 15


def test_every_roce_port_down_fails_the_cross_board_ring(b300: Path) -> None:
    with state.locked(b300) as node:
        for nic in node["nics"]:
            nic["link_up"] = False
    rc, out, _ = run(all_reduce_perf, b300, *LARGE, "-g", "16")
    assert rc == 3 and "Test NCCL failure" in out


def test_options_as_nccl_tests_reads_them(h100: Path) -> None:
    parsed = all_reduce(
        h100, "-b", "1M", "-e", "4M", "-i", "1048576", "-g", "2", "-c", "0", "-n", "5", "-w", "1"
    )
    assert [r["size_bytes"] for r in parsed["rows"]] == [1 << 20, 2 << 20, 3 << 20, 4 << 20]
    assert parsed["rows"][0]["in_place"]["wrong"] is None  # -c 0: N/A
    _, out, _ = run(
        all_reduce_perf, h100, "--minbytes=8", "--maxbytes", "64", "--stepfactor", "2", "--ngpus", "4"
    )
    assert out.startswith(
        "# nThread 1 nGpus 4 minBytes 8 maxBytes 64 step: 2(factor) warmup iters: 5 iters: 20"
    )
    rc, _, err = run(all_reduce_perf, h100, "-b", "1X")
    assert rc == 255 and "invalid size specified for 'minbytes'" in err
    rc, _, err = run(all_reduce_perf, h100, "-b", "2G", "-e", "1G")
    assert rc == 255 and "invalid sizes for 'minbytes' and 'maxbytes'" in err


def test_the_run_takes_a_few_seconds_and_loads_its_gpus(h100: Path, no_waiting: list[float]) -> None:
    seen: list[int] = []

    def pause(seconds: float) -> None:
        no_waiting.append(seconds)
        seen.append(sum(int((g.get("load") or {}).get("requests", 0)) for g in state.load(h100)["gpus"]))

    all_reduce_perf.pause = pause  # restored by no_waiting's monkeypatch
    all_reduce(h100, *SWEEP, "-g", "4")
    assert 1.0 <= sum(no_waiting) <= 3.0
    assert set(seen) == {4}  # one request on each of the ring's 4 GPUs while it runs
    node = state.load(h100)
    assert [int((g.get("load") or {}).get("requests", 0)) for g in node["gpus"]] == [0] * 8
    assert thermal.utilization(node["gpus"][0], float(node["gpus"][0]["load"]["t"])) > 0


def test_all_reduce_perf_is_installed_by_path_on_every_node(tmp_path: Path) -> None:
    spec = node.NodeSpec("node01", 1, "127.0.99.3", 2222, "h100-8", tmp_path / "node01")
    node.prepare(spec, "ssh-ed25519 AAAA test\n")
    tool = node.tool_path(spec.directory, "all_reduce_perf")
    assert tool == spec.directory / "opt-upper" / "nccl-tests" / "build" / "all_reduce_perf"
    assert tool.stat().st_mode & 0o111 and not (spec.directory / "bin" / "all_reduce_perf").exists()
    assert "/opt" in " ".join(node.launch_argv(spec)) and (spec.directory / "bin" / "dcgmi").exists()


# ------------------------------------------------------------------ dcgmi diag


def diag(node_dir: Path, level: int) -> tuple[int, dict[str, Any]]:
    rc, out, err = run(dcgmi, node_dir, "diag", "-r", str(level), "-j")
    assert not err
    return rc, dcgm.parse_diag_json(out)


@pytest.mark.parametrize(("level", "tests"), [(1, 9), (2, 11), (3, 15), (4, 17)])
def test_a_healthy_node_passes_every_level(h100: Path, level: int, tests: int) -> None:
    rc, parsed = diag(h100, level)
    assert rc == 0 and parsed["passed"] and not parsed["warned"]
    assert len(parsed["tests"]) == tests
    assert parsed["gpus"] == [{"gpu": gpu, "status": "Pass"} for gpu in range(8)]
    assert parsed["version"] == "3.3.9" and parsed["driver_version"] == "535.161.08"


@pytest.mark.parametrize(
    ("fault", "level", "test", "gpu", "text"),
    [
        ("dcgm-diag-fail", 2, "GPU Memory", 2, "Found 1024 faulty memory elements on GPU 2"),
        ("row-remap-pending", 1, "Page Retirement/Row Remap", 2, "row remappings are pending"),
        ("ecc-uncorrectable", 2, "GPU Memory", 1, "Detected 2 volatile double-bit ECC error(s) in GPU 1."),
        ("xid-94", 2, "GPU Memory", 4, "Detected 1 volatile double-bit ECC error(s) in GPU 4."),
        ("pcie-degraded", 2, "PCIe", 3, "running at PCI link width 8X"),
        ("nvlink-down", 2, "PCIe", 5, "GPU 5's NvLink link 7 is currently down"),
    ],
)
def test_each_fault_fails_the_dcgm_test_that_finds_it(
    b300: Path, fault: str, level: int, test: str, gpu: int, text: str
) -> None:
    faults.inject(b300, fault)
    if level > 1:  # the level below, which does not run the test, passes
        rc, parsed = diag(b300, level - 1)
        assert rc == 0 and parsed["passed"]
    rc, parsed = diag(b300, level)
    assert rc == dcgmi.RC_FAILED and not parsed["passed"]
    assert [(f["test"], f["gpu_ids"]) for f in parsed["failed"]] == [(test, [gpu])]
    assert any(text in message for message in parsed["failed"][0]["messages"])
    assert [g["gpu"] for g in parsed["gpus"] if g["status"] == "Fail"] == [gpu]
    faults.clear(b300, fault)
    assert diag(b300, level)[0] == 0


def test_a_gpu_off_the_bus_warns_and_the_rest_are_tested(b300: Path) -> None:
    faults.inject(b300, "xid-79")
    rc, parsed = diag(b300, 2)
    assert rc == 0 and parsed["passed"] and parsed["warned"]
    assert [g["gpu"] for g in parsed["gpus"]] == list(range(15))


def test_dcgmi_text_mode_and_bad_command_lines(b300: Path) -> None:
    faults.inject(b300, "dcgm-diag-fail")
    rc, out, _ = run(dcgmi, b300, "diag", "--run", "medium")
    assert rc == dcgmi.RC_FAILED and "| GPU Memory                | Fail" in out
    assert run(dcgmi, b300, "diag", "-r", "5", "-j")[0] == 1
    assert run(dcgmi, b300, "diag", "-j")[0] == 1
    assert run(dcgmi, b300, "discovery", "-l")[0] == 1
