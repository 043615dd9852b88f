"""The simulated hardware health (issue 25): `nvidia-smi nvlink -s/-e`, `dmesg`, the PCIe link in
`--query-gpu` and `-q -x`, and the health faults, each read back with the parser the node's modules
use (nvlink, xid, gpu_health_readings, nvidia_smi.parse_query_csv, roce_counters)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import (
    gpu_health_readings,
    nvidia_smi,
    nvlink,
    xid,
)
from ansible_collections.gpufleet.node.plugins.module_utils.node import node_health
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import roce_counters
from gpufleet_sim import (
    boot,
    build,
    faults,
    faults_health,
    kernel_log,
    link_flap,
    roce_traffic,
    state,
    sysfs,
    sysfs_rdma,
    thermal,
)
from gpufleet_sim.tools import dmesg, ethtool
from gpufleet_sim.tools import nvidia_smi as fake_smi

from tests.unit.sim.fake_node import build_nodes, copy_node, node_fixture, run, smi

PCIE_FIELDS = [
    "uuid",
    "pcie.link.gen.gpucurrent",
    "pcie.link.gen.max",
    "pcie.link.gen.gpumax",
    "pcie.link.gen.hostmax",
    "pcie.link.width.current",
    "pcie.link.width.max",
]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each profile's node (state and sysfs) built once; each test works on a copy."""
    return build_nodes(tmp_path_factory, ("b300-16", "h100-8"))


b300 = node_fixture("b300-16", "built")
h100 = node_fixture("h100-8", "built")


def health(node_dir: Path) -> list[dict[str, Any]]:
    return gpu_health_readings.parse_health_xml(smi(node_dir, "-q", "-x"))


def pcie(node_dir: Path) -> list[dict[str, Any]]:
    text = smi(node_dir, "--query-gpu=" + ",".join(PCIE_FIELDS), "--format=csv,noheader,nounits")
    return nvidia_smi.parse_query_csv(text, fields=PCIE_FIELDS)


def xids(node_dir: Path, *argv: str) -> list[dict[str, Any]]:
    rc, out, err = run(dmesg, node_dir, *argv)
    assert (rc, err) == (0, "")
    return xid.parse_kernel_log(out)


def uuids(node_dir: Path) -> list[str]:
    return [gpu["uuid"] for gpu in state.present_gpus(state.load(node_dir))]


def inject(node_dir: Path, name: str) -> None:
    assert faults.inject(node_dir, name)


def reboot(node_dir: Path) -> None:
    with state.locked(node_dir) as current:
        boot.power_cycle(current, node_dir / "sys")


def load_all(node_dir: Path) -> None:
    """One request in flight on every GPU (what a burn-in or a serving instance does)."""
    with state.locked(node_dir) as current:
        thermal.change_load(current, [g["uuid"] for g in current["gpus"]], +1, time.time())


# ------------------------------------------------------------------ nvidia-smi nvlink


@pytest.mark.parametrize(("profile", "gpus", "speed"), [("b300-16", 16, 53.125), ("h100-8", 8, 26.562)])
def test_nvlink_status_lists_every_link_of_every_gpu_active_at_the_profile_speed(
    built: dict[str, Path], tmp_path: Path, profile: str, gpus: int, speed: float
) -> None:
    node = copy_node(built, tmp_path / profile, profile)
    for argv in (("nvlink", "-s"), ("nvlink", "--status")):
        report = nvlink.parse_status(smi(node, *argv))
        assert [g["index"] for g in report] == list(range(gpus))
        assert [g["uuid"] for g in report] == uuids(node)
        for gpu in report:
            assert len(gpu["links"]) == 18
            assert {(link["active"], link["speed_gbps"]) for link in gpu["links"]} == {(True, speed)}
            assert not gpu["all_inactive"]


def test_nvlink_status_of_one_gpu_and_one_link_in_the_real_layout(b300: Path) -> None:
    text = smi(b300, "nvlink", "-s", "-i", "3")
    # the real driver's layout: a tab and a space before each link (utku H200 capture)
    assert text.splitlines()[1] == "\t Link 0: 53.125 GB/s"
    assert [g["index"] for g in nvlink.parse_status(text)] == [3]
    one = nvlink.parse_status(smi(b300, "nvlink", "-s", "-i", "3", "-l", "17"))
    assert one[0]["links"] == [{"link": 17, "active": True, "speed_gbps": 53.125}]


def test_nvlink_error_counters_are_zero_until_something_moves_them(b300: Path) -> None:
    report = nvlink.parse_error_counters(smi(b300, "nvlink", "-e"))
    assert len(report) == 16
    assert {tuple(sorted(link["counters"].items())) for g in report for link in g["links"]} == {
        (("crc", 0), ("recovery", 0), ("replay", 0))
    }
    with state.locked(b300) as current:
        current["gpus"][2]["nvlink"]["errors"]["11"] = {"replay": 4, "crc": 1}
    again = nvlink.parse_error_counters(smi(b300, "nvlink", "--errorcounters", "-i", "2"))
    assert again[0]["links"][11]["counters"] == {"replay": 4, "recovery": 0, "crc": 1}
    assert again[0]["links"][10]["counters"] == {"replay": 0, "recovery": 0, "crc": 0}


def test_a_gpu_with_every_link_down_prints_the_nvml_line(h100: Path) -> None:
    with state.locked(h100) as current:
        current["gpus"][0]["nvlink"]["inactive"] = list(range(18))
    report = nvlink.parse_status(smi(h100, "nvlink", "-s"))
    assert (report[0]["all_inactive"], report[0]["links"]) == (True, [])
    assert not report[1]["all_inactive"]


@pytest.mark.parametrize(
    "argv", [("nvlink",), ("nvlink", "-s", "-e"), ("nvlink", "-x"), ("nvlink", "-s", "-l", "18")]
)
def test_nvlink_refuses_what_it_does_not_know(b300: Path, argv: tuple[str, ...]) -> None:
    rc, out, _ = run(fake_smi, b300, *argv)
    assert rc == 2 and out.startswith("Invalid combination of input arguments.")


def test_nvlink_down_takes_link_7_of_gpu_5_down_and_its_clear_brings_it_back(b300: Path) -> None:
    inject(b300, "nvlink-down")
    report = nvlink.parse_status(smi(b300, "nvlink", "-s"))
    down = [(g["index"], link["link"]) for g in report for link in g["links"] if not link["active"]]
    assert down == [(5, 7)]
    assert report[5]["links"][7]["speed_gbps"] is None
    assert faults.clear(b300, "nvlink-down") == ["nvlink-down"]
    assert all(link["active"] for g in nvlink.parse_status(smi(b300, "nvlink", "-s")) for link in g["links"])


# ------------------------------------------------------------------ dmesg


def test_dmesg_of_a_healthy_node_has_its_boot_lines_and_no_xid(b300: Path) -> None:
    rc, out, _ = run(dmesg, b300)
    assert rc == 0
    assert out.startswith("[    0.000000] Linux version ")
    assert "mlx5_core 0000:15:00.0: firmware version: 40.44.1036\n" in out
    assert xids(b300) == []


def test_xid_79_takes_gpu_6_off_the_bus_and_logs_it_with_its_bus_id(h100: Path) -> None:
    gpu6 = state.present_gpus(state.load(h100))[6]
    inject(h100, "xid-79")
    events = xids(h100)
    assert [(e["xid"], e["pci_bus_id"], e["pid"], e["process"]) for e in events] == [
        (79, kernel_log.xid_bus(gpu6), None, None)
    ]
    assert kernel_log.xid_bus(gpu6) == state.sysfs_bdf(gpu6["pci_bus_id"])[:-2]
    assert events[0]["message"] == "GPU has fallen off the bus."
    assert float(events[0]["timestamp"]) >= kernel_log.UP_AFTER_BOOT_S
    # gone from nvidia-smi (as gpu-missing) and from sysfs
    assert gpu6["uuid"] not in uuids(h100) and len(uuids(h100)) == 7
    assert [g["uuid"] for g in health(h100)] == uuids(h100)
    assert not (h100 / "sys" / "bus" / "pci" / "devices" / state.sysfs_bdf(gpu6["pci_bus_id"])).exists()
    faults.clear(h100, "xid-79")
    assert gpu6["uuid"] in uuids(h100)
    assert [e["xid"] for e in xids(h100)] == [79]  # the log is history


def test_a_reboot_starts_a_new_log_and_finds_the_gpu_that_fell_off_the_bus(h100: Path) -> None:
    # issue 39: Xid 79 is what a reboot clears (the guardian reboots for it); a GPU gone for good is
    # gpu-missing, which a reboot keeps (test_guardian_faults)
    inject(h100, "xid-79")
    reboot(h100)
    assert xids(h100) == []
    assert len(uuids(h100)) == 8
    assert "xid-79" not in state.load(h100)["faults"]


def test_a_reboot_ends_a_shutdown_stuck_on_its_driver(h100: Path) -> None:
    inject(h100, "graceful-ignored")
    assert "graceful-ignored" in state.load(h100)["faults"]
    reboot(h100)
    assert "graceful-ignored" not in state.load(h100)["faults"]


def test_xid_94_logs_a_contained_error_and_the_gpu_keeps_serving(b300: Path) -> None:
    gpu4 = state.present_gpus(state.load(b300))[4]
    inject(b300, "xid-94")
    events = xids(b300)
    assert [(e["xid"], e["pci_bus_id"]) for e in events] == [(94, kernel_log.xid_bus(gpu4))]
    assert events[0]["message"] == "Contained: SM (0x1). RST: No, D-RST: No"
    assert xid.describe(94).severity == "warn"
    readings = health(b300)
    assert len(readings) == 16
    ecc = {g["uuid"]: g["ecc"] for g in readings}
    assert (
        ecc[gpu4["uuid"]]["volatile"]["dram_uncorrectable"],
        ecc[gpu4["uuid"]]["volatile"]["uncorrectable"],
    ) == (
        1,
        1,
    )
    assert sum(e["volatile"]["uncorrectable"] for e in ecc.values()) == 1
    faults.clear(b300, "xid-94")
    assert all(g["ecc"]["volatile"]["uncorrectable"] == 0 for g in health(b300))


@pytest.mark.parametrize(
    ("argv", "stamp"),
    [
        ((), r"^[0-9]+\.[0-9]{6}$"),
        (("-T",), r"^[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9][0-9] [0-9:]{8} [0-9]{4}$"),
        (("--time-format=iso",), r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8},[0-9]{6}[+-][0-9]{2}:[0-9]{2}$"),
        (("-x", "--time-format", "iso"), r"^[0-9]{4}-"),
        (("--notime",), None),
    ],
)
def test_dmesg_time_formats_read_as_the_real_ones(
    b300: Path, argv: tuple[str, ...], stamp: str | None
) -> None:
    inject(b300, "xid-94")
    (event,) = xids(b300, *argv)
    assert event["xid"] == 94
    if stamp is None:
        assert event["timestamp"] is None
    else:
        assert event["timestamp"] is not None
        assert re.match(stamp, event["timestamp"]), event["timestamp"]
    if "-x" in argv:
        _, out, _ = run(dmesg, b300, *argv)
        assert any(line.startswith("kern  :warn  : ") and "Xid" in line for line in out.splitlines())


def test_dmesg_clear_and_bad_options(b300: Path) -> None:
    inject(b300, "xid-94")
    assert run(dmesg, b300, "-C") == (0, "", "")
    assert run(dmesg, b300) == (0, "", "")
    rc, out, err = run(dmesg, b300, "--bogus")
    assert (rc, out) == (1, "")
    assert err == "dmesg: unrecognized option '--bogus'\nTry 'dmesg --help' for more information.\n"
    assert run(dmesg, b300, "--time-format=delta")[0] == 1


# ------------------------------------------------------------------ PCIe link


def test_an_idle_gpu_drops_to_gen1_at_full_width_and_returns_to_its_max_under_load(b300: Path) -> None:
    idle = pcie(b300)
    assert {
        (
            r["pcie.link.gen.gpucurrent"],
            r["pcie.link.gen.max"],
            r["pcie.link.gen.gpumax"],
            r["pcie.link.gen.hostmax"],
            r["pcie.link.width.current"],
            r["pcie.link.width.max"],
        )
        for r in idle
    } == {(1, 6, 6, 6, 16, 16)}
    assert {
        (g["pcie"]["gen_current"], g["pcie"]["gen_max"], g["pcie"]["width_current"]) for g in health(b300)
    } == {(1, 6, 16)}
    load_all(b300)
    assert {r["pcie.link.gen.gpucurrent"] for r in pcie(b300)} == {6}
    xml = health(b300)
    assert {
        (g["pcie"]["gen_current"], g["pcie"]["gen_device_max"], g["pcie"]["width_current"]) for g in xml
    } == {(6, 6, 16)}


def test_pcie_degraded_is_gpu_3_at_x8_and_gen1_under_load(h100: Path) -> None:
    gpu3 = state.present_gpus(state.load(h100))[3]
    inject(h100, "pcie-degraded")
    load_all(h100)
    by_uuid = {r["uuid"]: r for r in pcie(h100)}
    assert (
        by_uuid[gpu3["uuid"]]["pcie.link.gen.gpucurrent"],
        by_uuid[gpu3["uuid"]]["pcie.link.width.current"],
    ) == (
        1,
        8,
    )
    assert (by_uuid[gpu3["uuid"]]["pcie.link.gen.max"], by_uuid[gpu3["uuid"]]["pcie.link.width.max"]) == (
        5,
        16,
    )
    others = [r for u, r in by_uuid.items() if u != gpu3["uuid"]]
    assert {(r["pcie.link.gen.gpucurrent"], r["pcie.link.width.current"]) for r in others} == {(5, 16)}
    xml = {g["uuid"]: g["pcie"] for g in health(h100)}
    assert (xml[gpu3["uuid"]]["width_current"], xml[gpu3["uuid"]]["gen_current"]) == (8, 1)
    devdir = sysfs.endpoint_dir(h100 / "sys", state.load(h100), state.sysfs_bdf(gpu3["pci_bus_id"]))
    assert (devdir / "current_link_width").read_text() == "8\n"
    reboot(h100)  # physical: a reboot does not reseat the card
    assert {g["uuid"]: g["pcie"]["width_current"] for g in health(h100)}[gpu3["uuid"]] == 8
    faults.clear(h100, "pcie-degraded")
    assert {r["pcie.link.width.current"] for r in pcie(h100)} == {16}
    assert (devdir / "current_link_width").read_text() == "16\n"


# ------------------------------------------------------------------ memory faults


def test_row_remap_pending_on_gpu_2_is_applied_by_a_reboot(b300: Path) -> None:
    gpu2 = state.present_gpus(state.load(b300))[2]["uuid"]
    inject(b300, "row-remap-pending")
    rows = {g["uuid"]: g["remapped_rows"] for g in health(b300)}
    assert rows[gpu2] == {"correctable": 0, "uncorrectable": 0, "pending": True, "failure": False}
    assert [u for u, r in rows.items() if r["pending"]] == [gpu2]
    csv = smi(b300, "--query-gpu=uuid,remapped_rows.pending", "--format=csv,noheader")
    assert f"{gpu2}, Yes" in csv.splitlines()
    reboot(b300)
    after = {g["uuid"]: g["remapped_rows"] for g in health(b300)}[gpu2]
    assert (after["pending"], after["uncorrectable"]) == (False, 1)
    faults.clear(b300, "row-remap-pending")
    assert {g["uuid"]: g["remapped_rows"] for g in health(b300)}[gpu2]["uncorrectable"] == 0


def test_ecc_uncorrectable_is_2_on_gpu_1_volatile_and_aggregate(h100: Path) -> None:
    gpu1 = state.present_gpus(state.load(h100))[1]["uuid"]
    inject(h100, "ecc-uncorrectable")
    ecc = {g["uuid"]: g["ecc"] for g in health(h100)}
    assert (ecc[gpu1]["volatile"]["dram_uncorrectable"], ecc[gpu1]["aggregate"]["dram_uncorrectable"]) == (
        2,
        2,
    )
    assert sum(e["aggregate"]["uncorrectable"] for e in ecc.values()) == 2
    reboot(h100)  # the driver counts volatile errors from its load; the lifetime count stays
    ecc = {g["uuid"]: g["ecc"] for g in health(h100)}
    assert (ecc[gpu1]["volatile"]["uncorrectable"], ecc[gpu1]["aggregate"]["uncorrectable"]) == (0, 2)
    faults.clear(h100, "ecc-uncorrectable")
    assert all(g["ecc"]["aggregate"]["uncorrectable"] == 0 for g in health(h100))


def test_recovery_action_reboot_on_gpu_7_reads_in_every_format_and_a_reboot_takes_it(b300: Path) -> None:
    """-q -x (gpu_health_readings), -q and --query-gpu all name GPU 7's "Node Reboot"; every other GPU
    stays None; a reboot clears it, as the action itself does on a real node."""
    gpu7 = state.present_gpus(state.load(b300))[7]["uuid"]
    assert {g["recovery_action"] for g in health(b300)} == {"None"}
    inject(b300, "recovery-action-reboot")
    actions = {g["uuid"]: g["recovery_action"] for g in health(b300)}
    assert actions[gpu7] == "Node Reboot" and {a for u, a in actions.items() if u != gpu7} == {"None"}
    text = smi(b300, "-q", "-i", "7")
    assert re.search(r"^    GPU Recovery Action +: Node Reboot$", text, re.M), text
    csv = smi(b300, "--query-gpu=uuid,gpu_recovery_action", "--format=csv,noheader")
    assert f"{gpu7}, Node Reboot" in csv.splitlines()
    assert csv.count(", None") == len(actions) - 1
    # the gate's and the watch's judge on the simulator's -q -x: GPU 7 alone fails, saying reboot
    failed = [c for c in node_health.judge({"gpus": health(b300)}) if not c["ok"]]
    assert [(c["name"], c["value"], c["limit"]) for c in failed] == [
        (f"health.recovery_action[{gpu7}]", "Node Reboot", "None")
    ]
    assert "reboot it" in failed[0]["message"]
    reboot(b300)
    assert {g["recovery_action"] for g in health(b300)} == {"None"}
    faults.clear(b300, "recovery-action-reboot")
    assert {g["recovery_action"] for g in health(b300)} == {"None"}
    inject(b300, "recovery-action-reboot")
    faults.clear(b300, "recovery-action-reboot")
    assert "recovery_action" not in state.present_gpus(state.load(b300))[7]


def _back(node_dir: Path, seconds: float) -> None:
    """GPU 0's replay storm began ``seconds`` earlier than it did."""
    with state.locked(node_dir) as current:
        current["gpus"][0]["pcie"]["replays"]["t"] -= seconds


def test_pcie_replays_rise_on_gpu_0_and_the_judge_fails_their_rise(b300: Path) -> None:
    """-q -x replay_counter (and -q "Replays Since Reset") of GPU 0 rise 5 a second from the inject;
    the other GPUs stay at 0; node_health's judge over two reads fails GPU 0 alone; the clear stops it."""
    gpu0 = state.present_gpus(state.load(b300))[0]["uuid"]
    assert {g["pcie"]["replay_counter"] for g in health(b300)} == {0}
    inject(b300, "pcie-replays")
    _back(b300, 10.0)  # the fault injected 10 s ago
    before = health(b300)
    first = {g["uuid"]: g["pcie"]["replay_counter"] for g in before}
    assert first[gpu0] >= 50 and {n for u, n in first.items() if u != gpu0} == {0}
    assert re.search(r"^        Replays Since Reset +: [1-9][0-9]+$", smi(b300, "-q", "-i", "0"), re.M)
    _back(b300, 6.0)  # 6 s later
    after = health(b300)
    failed = [c for c in node_health.pcie_replay_checks(before, after, 6.0, "during the test") if not c["ok"]]
    assert [(c["name"], c["limit"]) for c in failed] == [(f"health.pcie_replays[{gpu0}]", 8)]
    assert failed[0]["value"] >= 30
    faults.clear(b300, "pcie-replays")
    assert {g["pcie"]["replay_counter"] for g in health(b300)} == {0}


# ------------------------------------------------------------------ NIC and firmware


def test_nic_link_flap_flaps_the_last_port_every_period_while_it_reads_up(b300: Path) -> None:
    last = max(state.load(b300)["nics"], key=lambda n: n["slot"])
    net = b300 / "sys" / "class" / "net" / last["netdev"]

    def read(at: float) -> tuple[int, int, int]:
        stats = roce_counters.parse_ethtool_stats(roce_traffic.read(b300, last["netdev"], at) or "")
        down, up = ((net / name).read_text() for name in ("carrier_down_count", "carrier_up_count"))
        assert (net / "operstate").read_text() == "up\n" and (net / "carrier").read_text() == "1\n"
        return stats["link_down_events_phy"], int(down), int(up)

    inject(b300, "nic-link-flap")
    since = float(next(n for n in state.load(b300)["nics"] if n["slot"] == last["slot"])["flap"]["since"])
    period = link_flap.FLAP_PERIOD_S
    assert read(since + 0.1) == (1, 1, 1)  # the inject's own flap
    assert read(since + period - 0.1) == (1, 1, 1)
    assert read(since + period + 0.1) == (2, 2, 2)
    # any 5 s window sees at least one flap
    start = read(since + 2 * period + 0.05)[0]
    assert read(since + 2 * period + 5.05)[0] - start == 1
    assert read(since + 10 * period + 0.1) == (11, 11, 11)
    # ethtool -S itself reads the same counters now (no flap is due before since + 11 periods)
    stats = roce_counters.parse_ethtool_stats(run(ethtool, b300, "-S", last["netdev"])[1])
    assert stats["link_down_events_phy"] == 11
    others = [n for n in state.load(b300)["nics"] if n["slot"] != last["slot"]]
    assert all(int(n.get("carrier_down_count", 0)) == 0 for n in others)
    _, log, _ = run(dmesg, b300)
    assert log.splitlines()[-2].endswith(f"{last['netdev']}: Link down")
    assert log.splitlines()[-1].endswith(f"{last['netdev']}: Link up")
    assert faults.clear(b300, "nic-link-flap") == ["nic-link-flap"]
    # the flapping stopped; what it counted stays
    assert read(since + 100 * period) == (11, 11, 11)
    assert "flap" not in next(n for n in state.load(b300)["nics"] if n["slot"] == last["slot"])


def test_nic_symbol_errors_rise_on_the_first_port_only_and_fail_judge_phy(b300: Path) -> None:
    nics = state.load(b300)["nics"]
    first = min(nics, key=lambda n: int(n["slot"]))
    counters = b300 / "sys" / "class" / "infiniband" / first["ibdev"] / "ports" / "1" / "counters"

    def read(nic: dict[str, Any], at: float) -> dict[str, int]:
        stats = roce_counters.parse_ethtool_stats(roce_traffic.read(b300, nic["netdev"], at) or "")
        port = b300 / "sys" / "class" / "infiniband" / nic["ibdev"] / "ports" / "1" / "counters"
        for name in sysfs_rdma.PORT_COUNTERS:
            stats[name] = int((port / name).read_text())
        return stats

    now = time.time()
    before = {n["ibdev"]: read(n, now) for n in nics}
    assert all(before[n["ibdev"]]["symbol_error"] == 0 for n in nics)
    inject(b300, "nic-symbol-errors")
    after = {n["ibdev"]: read(n, now + 60) for n in nics}
    rise = after[first["ibdev"]]["rx_symbol_err_phy"] - before[first["ibdev"]]["rx_symbol_err_phy"]
    # 5 a second for about 60 s (the inject happened between the two reads' clocks)
    assert 250 <= rise <= 300 and int(counters.joinpath("symbol_error").read_text()) == rise
    verdicts = roce_counters.judge_phy(
        first["ibdev"], before[first["ibdev"]], after[first["ibdev"]], 60, "now"
    )
    failed = [c["name"] for c in verdicts if not c["ok"]]
    assert failed == [f"fabric.symbol_errors[{first['ibdev']}]"]
    for nic in nics:
        if nic["ibdev"] != first["ibdev"]:
            assert all(
                c["ok"]
                for c in roce_counters.judge_phy(
                    nic["ibdev"], before[nic["ibdev"]], after[nic["ibdev"]], 60, "now"
                )
            )
    assert faults.clear(b300, "nic-symbol-errors") == ["nic-symbol-errors"]
    # the rise stopped; what it counted stays
    later = read(first, now + 600)
    assert later["symbol_error"] == after[first["ibdev"]]["symbol_error"]


def test_firmware_mismatch_changes_every_vbios_and_nic_firmware_and_clears(h100: Path) -> None:
    profile = build.load_profile("h100-8")
    inject(h100, "firmware-mismatch")
    xml = smi(h100, "-q", "-x")
    parsed = nvidia_smi.parse_query_csv(
        smi(h100, "--query-gpu=uuid,vbios_version", "--format=csv,noheader"), fields=["uuid", "vbios_version"]
    )
    assert {r["vbios_version"] for r in parsed} == {"96.00.74.00.00"} != {profile["gpu"]["vbios_version"]}
    assert xml.count("<vbios_version>96.00.74.00.00</vbios_version>") == 8
    nics = state.load(h100)["nics"]
    fw = {(h100 / "sys" / "class" / "infiniband" / n["ibdev"] / "fw_ver").read_text().strip() for n in nics}
    assert fw == {"28.39.3559"} and profile["nic"]["fw_version"] == "28.39.3560"
    faults.clear(h100, "firmware-mismatch")
    assert f"<vbios_version>{profile['gpu']['vbios_version']}</vbios_version>" in smi(h100, "-q", "-x")
    assert (h100 / "sys" / "class" / "infiniband" / "mlx5_0" / "fw_ver").read_text() == "28.39.3560\n"


def test_previous_version_keeps_the_base_and_width() -> None:
    assert faults_health.previous_version("97.10.4A.00.02") == "97.10.4A.00.01"
    assert faults_health.previous_version("40.44.1036") == "40.44.1035"
    assert faults_health.previous_version("96.00.74.00.00") == "96.00.74.00.01"


# ------------------------------------------------------------------ registry


def test_every_health_fault_is_registered_and_undone_by_its_clear(b300: Path) -> None:
    assert set(faults_health.FAULTS) <= set(faults.FAULTS)
    assert set(faults_health.FAULTS) == {
        "pcie-degraded",
        "nvlink-down",
        "row-remap-pending",
        # a row its hardware cannot remap: pending again after every reset and reboot (issue 39)
        "row-remap-pending-persistent",
        # the OS deaf to its BMC's graceful request (a shutdown stuck on a driver), node_power's
        "graceful-ignored",
        "ecc-uncorrectable",
        "xid-79",
        "xid-94",
        "recovery-action-reboot",
        "pcie-replays",
        "nic-link-flap",
        "nic-link-flap-once",
        "nic-symbol-errors",
        "firmware-mismatch",
        "nccl-slow",
        "dcgm-diag-fail",
        # the NVSwitch fabric (faults_nvswitch.py)
        "nvlink-crc-storm",
        "fabric-manager-fault",
        "sxid",
        # a host that hangs (node_power.py; no node runs here, so only its listing)
        "node-hung",
        # the GPUDirect RDMA host pieces and the NIC's firmware (faults_gpudirect.py)
        "peermem-missing",
        "acs-enabled",
        "service-down",
        "mlx5-fw-error",
    }
    before = (health(b300), smi(b300, "nvlink", "-s"), smi(b300, "-L"), pcie(b300))
    for name in faults_health.FAULTS:
        inject(b300, name)
    assert faults.clear(b300) == list(faults_health.FAULTS)
    assert (health(b300), smi(b300, "nvlink", "-s"), smi(b300, "-L"), pcie(b300)) == before
    assert "fault_saved" not in state.load(b300) or state.load(b300)["fault_saved"] == {}


def test_gpu_missing_reapplied_by_a_reboot_still_hides_one_gpu(h100: Path) -> None:
    inject(h100, "gpu-missing")
    reboot(h100)
    assert len(uuids(h100)) == 7
    faults.clear(h100, "gpu-missing")
    assert len(uuids(h100)) == 8
