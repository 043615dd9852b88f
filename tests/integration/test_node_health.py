"""The hardware health maintenance breaks, judged by the gate before any instance starts and by the
watch while serving (issue 25), on a 10-node simulated fleet (subnet 127.0.44).

Every node serves first, as a passed gate leaves it (its units installed and pinned by the gate's own
steps, its markers written, its instances started). Then the health faults
are injected (those one read sees together on one node, each on its own GPU) and the gate runs
again: it blocks every faulted node, naming the check with value, limit and the GPU, stops the
instances it had, and admits the clean control node. The watch then names the faults that happen in
service (xid-94, row-remap-pending) on the serving control node.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from gpufleet_sim import control, state
from gpufleet_sim.fleet import Fleet

from tests.integration.conftest import INSTANCES, node_hosts, run_on, serve_as_a_passed_gate_leaves

# (node, fault, the check family that must name it). The hardware faults the health read sees hit
# different GPUs (faults_health.py: PCIe GPU 3, NVLink GPU 5, row remap GPU 2, ECC GPU 1, Xid 79 GPU 6,
# Xid 94 GPU 4, recovery action GPU 7), so they share a node and each is still named with its GPU (the
# fabric fault's GPUs 0-7 and the SXid's NVSwitch under check families of their own); a fault only a
# later step sees (the burn-in, the all-reduce, DCGM, the peers) has a node of its own, or shares one
# with a fault that same step sees (pcie-replays and nvlink-crc-storm, both in the burn-in's window).
FAULTED = [
    ("node02", "pcie-degraded", "health.pcie_width"),
    ("node02", "nvlink-down", "health.nvlink"),
    ("node02", "row-remap-pending", "health.row_remap_pending"),
    ("node02", "ecc-uncorrectable", "health.ecc_uncorrectable"),
    # the driver asks for a node reboot (GPU Recovery Action), nothing in the kernel log
    ("node02", "recovery-action-reboot", "health.recovery_action"),
    # nvidia-fabricmanager down on the first baseboard: GPUs 0-7's fabric In Progress (-q -x <fabric>)
    ("node02", "fabric-manager-fault", "health.fabric_manager"),
    ("node03", "xid-79", "health.xid"),
    ("node03", "xid-94", "health.ecc_uncorrectable"),
    # a fatal NVSwitch SXid (20034, LTSSM Fault Up) in the kernel log beside them
    ("node03", "sxid", "health.sxid"),
    # the all-reduce's bus bandwidth below the profile's floor, nothing else visibly wrong
    ("node04", "nccl-slow", "health.nccl_busbw"),
    # the last RoCE port flaps every 4 s: the burn-in's link-down counters see it
    ("node05", "nic-link-flap", "fabric.link_flaps"),
    # the first RoCE port (mlx5_0) counts 5 symbol errors a second: the all-reduce's or the burn-in's
    # RoCE window sees the rise. A node of its own: on node05 a slow all-reduce (over 0.6 s) blocked on
    # it before the burn-in that sees the flaps ran
    ("node10", "nic-symbol-errors", "fabric.symbol_errors"),
    # its VBIOS and NIC firmware one version behind its peers': the odd node out
    ("node06", "firmware-mismatch", "fleet.versions"),
    # a PDU capping the GPUs 5 s in every 10 s: every burn-in sample is judged, so the gate cannot
    # read only the uncapped half (its burn-in is longer than a wave)
    ("node07", "pdu-cap-in-service", "gpu_power.enforced_limit_w"),
    # faulty memory on GPU 2 that only DCGM's GPU Memory test finds (the profiles run dcgmi diag -r 2)
    ("node08", "dcgm-diag-fail", "health.dcgm_diag"),
    # GPU 0's PCIe link replays 5 a second: one reading is clean, the rise over the burn-in is not
    ("node09", "pcie-replays", "health.pcie_replays"),
    # and GPU 9's NVLink link 4 counts CRC errors (1500 a second idle, up to 5000 loaded): the same
    # burn-in window sees the rise
    ("node09", "nvlink-crc-storm", "health.nvlink_errors"),
    # GPUDirect RDMA's host pieces, the NVIDIA services and a NIC's firmware (issue 38): the health read
    # sees each, naming a thing of its own (the module, a switch port, a unit, an RDMA device)
    ("node02", "peermem-missing", "health.nvidia_peermem"),
    ("node02", "acs-enabled", "health.acs"),
    ("node02", "service-down", "health.service"),
    ("node02", "mlx5-fw-error", "fabric.mlx5_firmware"),
]
NODES = sorted({node for node, _, _ in FAULTED})
CONTROL = "node01"


def _active(fleet: Fleet, name: str) -> list[bool]:
    units = state.load(fleet.root / "nodes" / name).get("units", {})
    return [bool(units.get(f"vllm-{i}.service", {}).get("active")) for i in INSTANCES]


def _failed(host: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in host["checks"] if not c["ok"]}


@pytest.fixture(scope="module")
def gated(fleet_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    fleet: Fleet = fleet_factory(nodes=1 + len(NODES), subnet="127.0.44")
    serve_as_a_passed_gate_leaves(fleet, [CONTROL, *NODES])
    serving = {name: _active(fleet, name) for name in [CONTROL, *NODES]}
    for name, fault, _ in FAULTED:
        assert control.fault(fleet, name, fault, clear=False) == [fault]
    report_dir = tmp_path_factory.mktemp("health-gate")
    # 11 s: in a 5 s burn-in on a loaded 2-core machine an instance's first request could arrive after
    # the last sample (every GPU of the instance "peaked at 0 % utilization")
    code, report = run_on(fleet, report_dir, "gate", "--burn-in-seconds", "11")
    return {"fleet": fleet, "code": code, "report": report, "serving": serving, "report_dir": report_dir}


def test_the_nodes_served_before_the_gate(gated: dict[str, Any]) -> None:
    assert all(active == [True, True] for active in gated["serving"].values()), gated["serving"]


def test_every_faulted_node_is_blocked_naming_check_value_limit_and_gpu(gated: dict[str, Any]) -> None:
    report = gated["report"]
    assert gated["code"] == 1
    for name, fault, family in FAULTED:
        host = report["hosts"][name]
        assert host["status"] == "blocked", (name, fault, host.get("message"))
        named = {n: c for n, c in _failed(host).items() if n.split("[")[0] == family}
        assert named, (name, fault, sorted(_failed(host)))
        for c in named.values():
            assert c["value"] is not None and c["limit"] is not None, c
        # the node's message says what failed: the check's family, or the burn-in's or the peers' words
        said = (
            family.split(".")[0],
            "link-down events",
            "symbol errors",
            "odd node out",
            "power budget",
            "mlx5_core firmware",
        )
        assert any(word in host["message"] for word in said), host["message"]
        assert _active(gated["fleet"], name) == [False, False], f"{name} ({fault}) still serves"


def test_each_fault_is_named_with_its_gpu(gated: dict[str, Any]) -> None:
    report = gated["report"]
    width = next(
        c for n, c in _failed(report["hosts"]["node02"]).items() if n.startswith("health.pcie_width[")
    )
    assert (width["value"], width["limit"]) == (8, 16) and "x8 of x16" in width["message"]
    link = next(c for n, c in _failed(report["hosts"]["node02"]).items() if n.startswith("health.nvlink["))
    assert link["value"] == link["limit"] - 1 and "inactive: link 7" in link["message"]
    node02 = state.load(gated["fleet"].root / "nodes" / "node02")
    gpu7 = state.present_gpus(node02)[7]["uuid"]
    action = _failed(report["hosts"]["node02"])[f"health.recovery_action[{gpu7}]"]
    assert (action["value"], action["limit"]) == ("Node Reboot", "None")
    assert "GPU 7" in action["message"] and "reboot it" in action["message"]
    peermem = _failed(report["hosts"]["node02"])["health.nvidia_peermem"]
    assert (peermem["value"], peermem["limit"]) == ("not loaded", "loaded")
    assert (
        "modprobe nvidia_peermem (and add it to /etc/modules-load.d) then run the gate again"
        in peermem["message"]
    )
    switch = node02["pci_switches"][0]
    acs = {n: c for n, c in _failed(report["hosts"]["node02"]).items() if n.startswith("health.acs[")}
    assert f"health.acs[{switch['upstream']}]" in acs and len(acs) == 1 + len(switch["children"]), sorted(acs)
    assert all(
        (c["value"], c["limit"]) == ("SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+", "off")
        for c in acs.values()
    )
    assert "ECAP_ACS+0x6.w=0000" in next(iter(acs.values()))["message"]
    unit = _failed(report["hosts"]["node02"])["health.service[nvidia-fabricmanager.service]"]
    assert (unit["value"], unit["limit"]) == ("failed", "active") and "systemctl enable --now" in unit[
        "message"
    ]
    assert "health.service[nvidia-dcgm.service]" not in _failed(report["hosts"]["node02"])
    firmware = _failed(report["hosts"]["node02"])["fabric.mlx5_firmware[mlx5_1]"]
    assert (firmware["value"], firmware["limit"]) == (3, 0)
    assert (
        "health compromised" in firmware["message"]
        and "syndrome 0x1: firmware internal error" in firmware["message"]
    )
    assert [n for n in _failed(report["hosts"]["node02"]) if n.startswith("fabric.mlx5_firmware[")] == [
        "fabric.mlx5_firmware[mlx5_1]"
    ]
    node09 = state.load(gated["fleet"].root / "nodes" / "node09")
    gpu0 = state.present_gpus(node09)[0]["uuid"]
    replays = _failed(report["hosts"]["node09"])[f"health.pcie_replays[{gpu0}]"]
    assert replays["value"] > replays["limit"] == 8 and "during the burn-in" in replays["message"]
    gpu9 = state.present_gpus(node09)[9]["uuid"]
    crc = _failed(report["hosts"]["node09"])[f"health.nvlink_errors[{gpu9}]"]
    assert crc["value"] > crc["limit"] == 6000 and crc["unit"] == "CRC errors", crc
    assert "(GPU 9) NVLink errors during the burn-in" in crc["message"]
    assert [n for n in _failed(report["hosts"]["node09"]) if n.startswith("health.nvlink_errors[")] == [
        f"health.nvlink_errors[{gpu9}]"
    ]
    board = [g["uuid"] for g in state.present_gpus(node02) if g["nvlink_domain"] == 0]
    fabric = {n: c for n, c in _failed(report["hosts"]["node02"]).items() if "fabric_manager" in n}
    assert sorted(fabric) == sorted(f"health.fabric_manager[{u}]" for u in board) and len(board) == 8
    assert {(c["value"], c["limit"]) for c in fabric.values()} == {("In Progress/N/A", "Completed/Success")}
    assert all("nvidia-fabricmanager" in c["message"] for c in fabric.values())
    sxid = _failed(report["hosts"]["node03"])["health.sxid[0000:05:00.0]"]
    assert (sxid["value"], sxid["limit"]) == (20034, "no fatal SXid")
    assert "NVSwitch nvidia-nvswitch0 (0000:05:00.0): SXid 20034" in sxid["message"]
    gone = _failed(report["hosts"]["node03"])
    assert gone["health.gpu_count"]["value"] == 15 and gone["health.gpu_count"]["limit"] == 16
    xid79 = next(c for n, c in gone.items() if n.startswith("health.xid[") and c["value"] == 79)
    assert xid79["value"] == 79 and "fallen off the bus" in xid79["message"]
    # Xid 94 (contained ECC) warns; the uncorrectable error it counted blocks
    node03 = report["hosts"]["node03"]
    xid94 = next(c for c in node03["checks"] if c["name"].startswith("health.xid[") and c["value"] == 94)
    assert xid94["ok"] is True and xid94["value"] == 94 and "does not block" in xid94["message"]
    busbw = _failed(report["hosts"]["node04"])["health.nccl_busbw"]
    assert busbw["value"] < 60 and busbw["limit"] == 150 and "fabric.switch_ecn" in busbw["message"]
    odd = _failed(report["hosts"]["node06"])["fleet.versions[vbios]"]
    assert odd["value"] != odd["limit"] and "odd node out" in odd["message"]
    capped = [
        c
        for n, c in _failed(report["hosts"]["node07"]).items()
        if n.startswith("gpu_power.enforced_limit_w[")
    ]
    assert capped and all((c["value"], c["limit"]) == (1100.0, 1400.0) for c in capped)
    flap = _failed(report["hosts"]["node05"])["fabric.link_flaps[mlx5_7]"]
    assert flap["value"] >= 1 and flap["limit"] == 0 and "cabled to leaf" in flap["message"]
    symbols = _failed(report["hosts"]["node10"])["fabric.symbol_errors[mlx5_0]"]
    assert symbols["value"] > symbols["limit"] == 2
    # the all-reduce's RoCE window (before the burn-in) sees it first when it lasts over 0.6 s (3 errors)
    assert re.search(r"symbol errors during the (all-reduce|burn-in)", symbols["message"]), symbols["message"]
    assert "fabric.symbol_errors[mlx5_7]" not in _failed(report["hosts"]["node10"])
    assert not any(n.startswith("fabric.symbol_errors[") for n in _failed(report["hosts"]["node05"]))
    # only DCGM sees it: its GPU Memory test, naming GPU 2 by index and UUID; nothing else fails
    node08 = _failed(report["hosts"]["node08"])
    assert sorted(node08) == ["health.dcgm_diag[GPU Memory]"], sorted(node08)
    memory = node08["health.dcgm_diag[GPU Memory]"]
    uuid = state.load(gated["fleet"].root / "nodes" / "node08")["gpus"][2]["uuid"]
    assert (memory["value"], memory["limit"]) == ("Fail", "Pass")
    assert f"failed on GPU 2 ({uuid}, " in memory["message"]
    assert "Found 1024 faulty memory elements on GPU 2" in memory["message"]


def test_the_clean_node_is_admitted_and_serves(gated: dict[str, Any]) -> None:
    host = gated["report"]["hosts"][CONTROL]
    assert host["status"] == "ok", _failed(host)
    health = [c for c in host["checks"] if c["name"].startswith("health.")]
    assert health and all(c["ok"] for c in health)
    # every family judged on the control node (the PCIe generation under the burn-in's load)
    families = {c["name"].split("[")[0] for c in health}
    assert {
        "health.gpu_count",
        "health.pcie_width",
        "health.pcie_gen",
        "health.row_remap_pending",
        "health.recovery_action",
        "health.pcie_replays",
        "health.ecc_uncorrectable",
        "health.nvlink",
        "health.nvlink_errors",
        "health.fabric_manager",
        "health.nccl_busbw",
        "health.dcgm_diag",
        "health.nvidia_peermem",
        "health.acs",
        "health.service",
    } <= families
    # every RDMA device's firmware judged clean, and both expected units active
    firmware = [c for c in host["checks"] if c["name"].startswith("fabric.mlx5_firmware[")]
    # (judged again when the burn-in's load ends: each name twice)
    assert len({c["name"] for c in firmware}) == 8 and all(c["ok"] for c in firmware), firmware
    units = {c["name"] for c in host["checks"] if c["name"].startswith("health.service[")}
    assert units == {"health.service[nvidia-fabricmanager.service]", "health.service[nvidia-dcgm.service]"}
    assert _active(gated["fleet"], CONTROL) == [True, True]


def test_the_gate_page_shows_the_health_checks(gated: dict[str, Any]) -> None:
    page = (gated["report_dir"] / "report.html").read_text()
    assert "health.pcie_width" in page and "health.nvlink" in page


def test_a_clean_serving_node_passes_the_watchs_health(gated: dict[str, Any], tmp_path: Path) -> None:
    """Before the faults below are injected on it (a cleared Xid stays in the kernel log until a reboot)."""
    code, report = run_on(gated["fleet"], tmp_path / "watch", "watch", "--limit", CONTROL)
    assert code == 0, _failed(report["hosts"][CONTROL])
    assert set(node_hosts(report)) == {CONTROL}
    health = report["hosts"][CONTROL]["facts"]["gpufleet_watch"]["health"]
    assert health["gpu_count"] == 16 and health["xids"] == []
    assert health["gpudirect"]["peermem_loaded"] == 1 and set(
        health["gpudirect"]["acs_enabled"].values()
    ) == {0}
    assert health["nic_firmware_errors"] == {f"mlx5_{i}": 0 for i in range(8)}


def _watch_with(fleet: Fleet, fault: str, report_dir: Path) -> tuple[int, dict[str, Any]]:
    assert control.fault(fleet, CONTROL, fault, clear=False) == [fault]
    try:
        return run_on(fleet, report_dir, "watch", "--limit", CONTROL)
    finally:
        control.fault(fleet, CONTROL, fault, clear=True)


@pytest.mark.parametrize(
    ("fault", "family"),
    [
        ("xid-94", "health.ecc_uncorrectable"),
        ("row-remap-pending", "health.row_remap_pending"),
        ("recovery-action-reboot", "health.recovery_action"),
        ("pcie-replays", "health.pcie_replays"),
        ("nic-link-flap", "fabric.link_flaps"),
        ("nic-symbol-errors", "fabric.symbol_errors"),
        ("nvlink-crc-storm", "health.nvlink_errors"),
        ("fabric-manager-fault", "health.fabric_manager"),
        ("peermem-missing", "health.nvidia_peermem"),
        ("acs-enabled", "health.acs"),
        # its lines stay in the kernel log: after it only the SXid's and xid-79's, whose lines stay too
        ("mlx5-fw-error", "fabric.mlx5_firmware"),
        # its lines stay in the kernel log: after it only xid-79's, whose line stays too
        ("sxid", "health.sxid"),
        # a GPU that fell off the bus while serving: the watch read 15 GPUs and passed
        ("xid-79", "health.gpu_count"),
    ],
)
def test_the_watch_names_a_fault_that_happens_in_service(
    gated: dict[str, Any], fault: str, family: str, tmp_path: Path
) -> None:
    code, report = _watch_with(gated["fleet"], fault, tmp_path / "watch")
    assert code == 1
    failed = _failed(report["hosts"][CONTROL])
    named = [c for n, c in failed.items() if n.split("[")[0] == family]
    assert named, {n: (c["value"], c["limit"], c["message"]) for n, c in failed.items()}
    assert all(c["value"] is not None and c["limit"] is not None for c in named)
    prom = (tmp_path / "watch" / "gpufleet.prom").read_text()
    # a GPU gone, an uncorrectable error, a row remap, a recovery action, the NVLink fabric down or a fatal
    # SXid makes the node unsafe to serve (quarantine.UNSAFE); replays, flaps, symbol and CRC errors are
    # reported only
    unsafe = fault in (
        "xid-79",
        "xid-94",
        "row-remap-pending",
        "recovery-action-reboot",
        "fabric-manager-fault",
        "sxid",
    )
    message = report["hosts"][CONTROL]["message"]
    assert message.startswith("unsafe to serve (") == unsafe, message
    assert f'gpufleet_node_unsafe{{host="{CONTROL}",command="watch"}} {int(unsafe)}' in prom
    gpus = 15 if fault == "xid-79" else 16
    assert f'gpufleet_gpus{{host="{CONTROL}",command="watch"}} {gpus}' in prom
    if fault == "peermem-missing":
        assert f'gpufleet_nvidia_peermem_loaded{{host="{CONTROL}",command="watch"}} 0' in prom
    if fault == "acs-enabled":
        assert re.search(
            r'gpufleet_pcie_acs_enabled\{host="node01",command="watch",bridge="[0-9a-f:.]+"\} 1', prom
        )
    if fault == "mlx5-fw-error":
        assert [c["name"] for c in named] == ["fabric.mlx5_firmware[mlx5_1]"]
        assert 'gpufleet_rdma_firmware_errors{host="node01",command="watch",port="mlx5_1"} 3' in prom
    if fault == "pcie-replays":
        series = r'gpufleet_gpu_pcie_replays\{host="node01",command="watch",gpu="0",[^}]*\} [1-9]'
        assert re.search(series, prom), prom
    if fault == "nic-symbol-errors":
        series = r'gpufleet_rdma_symbol_errors_per_minute\{host="node01",command="watch",port="mlx5_0"\} '
        assert re.search(series + "[1-9]", prom), prom
        assert [c["name"] for c in named] == ["fabric.symbol_errors[mlx5_0]"]
    if fault == "nvlink-crc-storm":
        series = r'gpufleet_gpu_nvlink_errors_per_minute\{host="node01",command="watch",gpu="9",[^}]*'
        assert re.search(series + r'kind="crc"\} [1-9]', prom), prom
        assert [c["value"] > c["limit"] == 6000 for c in named] == [True]
    if fault == "fabric-manager-fault":
        assert len(named) == 8 and prom.count('state="In Progress",status="N/A"} 1') == 8, prom
    if fault == "sxid":
        assert [c["name"] for c in named] == ["health.sxid[0000:05:00.0]"]
        assert 'sxid="20034",sxid_severity="fatal"} 3' in prom, prom
    if fault == "recovery-action-reboot":
        assert 'action="Node Reboot"} 1' in prom and prom.count('action="None"} 0') == 15
    if fault == "xid-94":
        xid94 = next(c for c in report["hosts"][CONTROL]["checks"] if c["name"].startswith("health.xid["))
        assert xid94["value"] == 94
        assert 'xid="94"} 1' in prom
