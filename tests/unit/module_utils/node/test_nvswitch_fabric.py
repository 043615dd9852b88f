"""The NVSwitch fabric's health (issue 38 item 2): the GPUs' fabric registration (-q -x <fabric>), the
NVSwitch SXid lines in the kernel log, and the GPUs' NVLink CRC/replay/recovery errors over a window,
judged by node_health: first on the real captures (the H200, Blackwell and A100 -q -x, gpud's SXid
capture, the 8x A100 nvlink -e loop), then on the faults edited into them."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import gpu_health_readings, nvlink, xid
from ansible_collections.gpufleet.node.plugins.module_utils.node import node_health, watch

from tests.unit.mutations import read_capture

H200_IDLE = "h200-device/nvidia-smi-q-x-idle.xml"
BLACKWELL = "nvidia-smi-xml/telegraf-pro-6000-maxq-blackwell-v13.xml"
A100_535 = "nvidia-smi-xml/telegraf-a100-sxm4-v12.xml"
A100_510 = "nvidia-smi-xml/netdata-a100-sxm4-mig.xml"
SXID_79 = "xid/gpud-sxid-readme-xid-79-quoted.txt"
BREV_ERRORS = "nvlink/brev-8xa100-sxm4-40gb-535-nvlink-e-per-gpu-loop.txt"
H200 = "GPU-2e6e9300-13a8-2712-b2c8-503aade81b40"
H200_NA = "<fabric>\n\t\t\t<state>N/A</state>\n\t\t\t<status>N/A</status>"


def fabric(state: str, status: str) -> str:
    """The real H200's -q -x with its fabric section as an HGX GPU's would read."""
    text = read_capture(H200_IDLE)
    assert H200_NA in text
    return text.replace(H200_NA, f"<fabric>\n\t\t\t<state>{state}</state>\n\t\t\t<status>{status}</status>")


def sxid_log() -> str:
    """gpud's README quotes each kernel log line with '> ' and puts '>' between them: the lines alone."""
    lines = [line[2:] for line in read_capture(SXID_79).splitlines() if line.startswith("> ")]
    return "\n".join(lines) + "\n"


def brev_errors() -> str:
    """The loop of nvlink -e -i N for N=0..7 without the loop's own echo lines."""
    return "".join(
        line for line in read_capture(BREV_ERRORS).splitlines(keepends=True) if not line.startswith("===")
    )


def by_name(checks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in checks}


# ---------------------------------------------------------------- the fabric registration


def test_no_real_capture_is_on_an_nvswitch_fabric_so_none_is_judged() -> None:
    """The H200 (580), Blackwell workstation (590) and A100 (535) captures print <fabric> with state
    N/A; the A100 of driver 510 has no section: None everywhere, and no health.fabric_manager check."""
    for capture in (H200_IDLE, BLACKWELL, A100_535, A100_510):
        gpus = gpu_health_readings.parse_health_xml(read_capture(capture))
        assert [g["fabric"] for g in gpus] == [None] * len(gpus), capture
        checks = node_health.judge({"gpus": gpus, "links": None, "xids": None})
        assert not [c for c in checks if c["name"].startswith("health.fabric_manager")], capture


def test_a_completed_fabric_passes() -> None:
    (gpu,) = gpu_health_readings.parse_health_xml(fabric("Completed", "Success"))
    assert gpu["fabric"] == {"state": "Completed", "status": "Success"}
    check = by_name(node_health.judge({"gpus": [gpu]}))[f"health.fabric_manager[{H200}]"]
    assert (check["ok"], check["value"], check["limit"]) == (True, "Completed/Success", "Completed/Success")
    assert node_health.fact({"gpus": [gpu]})["gpus"][0]["fabric_state"] == "Completed"


@pytest.mark.parametrize(
    ("state", "status", "value"),
    [
        ("In Progress", "N/A", "In Progress/N/A"),
        ("Not Started", "N/A", "Not Started/N/A"),
        ("Completed", "Unknown Error", "Completed/Unknown Error"),
    ],
)
def test_a_fabric_not_completed_or_failed_blocks_saying_what_to_do(
    state: str, status: str, value: str
) -> None:
    (gpu,) = gpu_health_readings.parse_health_xml(fabric(state, status))
    failed = [c for c in node_health.judge({"gpus": [gpu]}) if not c["ok"]]
    assert [c["name"] for c in failed] == [f"health.fabric_manager[{H200}]"]
    (c,) = failed
    assert (c["value"], c["limit"]) == (value, "Completed/Success")
    assert f"{H200} (00000000:00:06.0, GPU 0)" in c["message"]
    assert "nvidia-fabricmanager" in c["message"] and "nvidia-smi -q -d FABRIC" in c["message"]
    fact = node_health.fact({"gpus": [gpu]})["gpus"][0]
    assert (fact["fabric_state"], fact["fabric_status"]) == (state, None if status == "N/A" else status)


def test_a_fabric_word_nvidia_smi_never_prints_is_refused() -> None:
    with pytest.raises(gpu_health_readings.ParseError, match=r"<fabric><state> .* is not a fabric state"):
        gpu_health_readings.parse_health_xml(fabric("Completed; rm -rf /", "Success"))


# ---------------------------------------------------------------- SXids


def test_the_real_sxid_capture_reads_every_line_beside_its_xid() -> None:
    """gpud's capture: one Xid 79 and eight SXid 20034 lines of three NVSwitches (four say Fatal, the
    others are the Severity/Data lines that follow one); parse_kernel_log still gives the Xid only."""
    events = xid.parse_kernel_events(sxid_log())
    assert [e["xid"] for e in events["xids"]] == [79] == [e["xid"] for e in xid.parse_kernel_log(sxid_log())]
    sxids = events["sxids"]
    assert len(sxids) == 8 and {e["sxid"] for e in sxids} == {20034}
    assert sxids[0] == {
        "sxid": 20034,
        "device": "nvidia-nvswitch1",
        "pci_bus_id": "0000:06:00.0",
        "severity": "fatal",
        "message": "Link 48 LTSSM Fault Up",
        "timestamp": "6781753.400584",
        "line": 6,
    }
    assert [e["severity"] for e in sxids].count("fatal") == 4
    assert sxids[2]["severity"] is None and sxids[2]["message"].startswith("Severity 1 Engine instance 60")


def test_a_fatal_sxid_blocks_per_switch_naming_it() -> None:
    gpus = gpu_health_readings.parse_health_xml(read_capture(H200_IDLE))
    sxids = xid.parse_kernel_events(sxid_log())["sxids"]
    checks = by_name(node_health.judge({"gpus": gpus, "sxids": sxids}))
    named = sorted(n for n in checks if n.startswith("health.sxid["))
    assert named == [f"health.sxid[0000:0{n}:00.0]" for n in (5, 6, 7)]
    c = checks["health.sxid[0000:05:00.0]"]
    assert (c["ok"], c["value"], c["limit"]) == (False, 20034, "no fatal SXid")
    assert "NVSwitch nvidia-nvswitch0 (0000:05:00.0): SXid 20034" in c["message"]
    assert "LTSSM Fault Up" in c["message"] and "reboot it" in c["message"]
    fact = node_health.fact({"gpus": gpus, "sxids": sxids})["sxids"]
    assert {k: fact[0][k] for k in ("pci_bus_id", "device", "sxid")} == {
        "pci_bus_id": "0000:05:00.0",
        "device": "nvidia-nvswitch0",
        "sxid": 20034,
    }
    assert (fact[0]["events"], fact[0]["severity"]) == (4, "fatal")


def test_a_non_fatal_sxid_warns_and_one_whose_severity_is_never_said_blocks() -> None:
    non_fatal = (
        "[111111111.111] nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, "
        "Link 32 egress non-posted PRIV error (First)\n"
    )
    (c,) = node_health.sxid_checks(xid.parse_kernel_events(non_fatal)["sxids"])
    assert (c["ok"], c["value"]) == (True, 12028) and "(a warning: it does not block)" in c["message"]
    assert "egress non-posted PRIV error" in c["message"]
    # a wrapped log kept only the Severity line of an SXid: not known to be harmless
    only_severity = "[5.0] nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Severity 1 Engine instance 60\n"
    (c,) = node_health.sxid_checks(xid.parse_kernel_events(only_severity)["sxids"])
    assert (c["ok"], c["value"]) == (False, 20034) and "severity not said" in c["message"]


def test_a_damaged_sxid_line_is_refused() -> None:
    damaged = sxid_log().replace("SXid (PCI:0000:06:00.0): 20034", "SXid (PCI:0000:06:00.0): twenty")
    with pytest.raises(xid.ParseError, match=r"^kernel log \(Xid\): line 6 names SXid"):
        xid.parse_kernel_events(damaged)


def test_after_load_judges_only_the_sxids_logged_during_the_load() -> None:
    logs = ["[    0.000000] Linux version 6.8.0\n", "[    0.000000] Linux version 6.8.0\n" + sxid_log()]
    xml = read_capture(H200_IDLE)

    def run_command(argv: list[str], **kwargs: Any) -> tuple[int, str, str]:
        if argv == ["dmesg"]:
            return 0, logs.pop(0), ""
        assert argv == ["nvidia-smi", "-q", "-x"], argv
        return 0, xml, ""

    options = {"nvlink": False, "expected_gpu_count": 1}
    after = node_health.AfterLoad(
        run_command, "nvidia-smi", "dmesg", options, "burn_in.health", "during the burn-in"
    )
    after.start()
    after.stop()
    c = by_name(after.checks())["health.sxid[0000:06:00.0]"]
    assert c["ok"] is False and "during the burn-in" in c["message"] and logs == []


# ---------------------------------------------------------------- NVLink error counters


def test_the_real_nvlink_error_counters_sum_per_gpu() -> None:
    """8x A100 (driver 535), 12 links each, every counter 0."""
    totals = nvlink.error_totals(nvlink.parse_error_counters(brev_errors()))
    assert len(totals) == 8
    assert totals[0] == {
        "index": 0,
        "uuid": "GPU-fde0a018-ad1a-bbec-ccf6-50a9f64bd178",
        "crc": 0,
        "replay": 0,
        "recovery": 0,
    }


def test_flit_and_data_crc_counters_add_up_and_na_is_unknown() -> None:
    text = (
        "GPU 0: NVIDIA B300 (UUID: GPU-b)\n"
        "\t Link 0: Replay Errors: 1\n\t Link 0: Recovery Errors: N/A\n"
        "\t Link 0: Flit CRC Errors: 5\n\t Link 0: Data CRC Errors: 7\n"
        "\t Link 1: Replay Errors: 2\n\t Link 1: Recovery Errors: N/A\n"
        "\t Link 1: Flit CRC Errors: 0\n\t Link 1: Data CRC Errors: 1\n"
    )
    (gpu,) = nvlink.error_totals(nvlink.parse_error_counters(text))
    assert (gpu["crc"], gpu["replay"], gpu["recovery"]) == (13, 3, None)


def _edited(link2: dict[str, int]) -> list[dict[str, Any]]:
    """The real capture with GPU 0's link 2 counting ``link2``'s errors."""
    text = brev_errors()
    for label, count in link2.items():
        old = f"Link 2: {label} Errors: 0\n"
        text = text.replace(old, f"Link 2: {label} Errors: {count}\n", 1)
    totals: list[dict[str, Any]] = nvlink.error_totals(nvlink.parse_error_counters(text))
    return totals


@pytest.mark.parametrize(
    ("link2", "ok", "value", "limit", "unit"),
    [
        # DCGM: CRC errors matter at 100 a second; 30 s is allowed a minute's worth, 6000
        ({"CRC": 6000}, True, 6000, 6000, "CRC errors"),
        ({"CRC": 6001}, False, 6001, 6000, "CRC errors"),
        # DCGM: any replay or recovery error fails
        ({"Replay": 1}, False, 1, 0, "replay errors"),
        ({"Recovery": 2, "CRC": 10}, False, 2, 0, "recovery errors"),
    ],
)
def test_nvlink_errors_over_a_window_against_dcgms_limits(
    link2: dict[str, int], ok: bool, value: int, limit: int, unit: str
) -> None:
    before = nvlink.error_totals(nvlink.parse_error_counters(brev_errors()))
    checks = node_health.nvlink_error_checks(before, _edited(link2), 30.0, "during the burn-in")
    assert len(checks) == 8 and all(c["ok"] for c in checks[1:])
    c = checks[0]
    assert c["name"] == "health.nvlink_errors[GPU-fde0a018-ad1a-bbec-ccf6-50a9f64bd178]"
    assert (c["ok"], c["value"], c["limit"], c["unit"]) == (ok, value, limit, unit)
    assert "(GPU 0) NVLink errors during the burn-in (30 s)" in c["message"]
    assert ("nvidia-smi nvlink -e -i 0" in c["message"]) is not ok


def test_a_longer_window_allows_more_crc_errors_and_a_reset_counts_from_zero() -> None:
    before = _edited({"CRC": 50000})
    after = _edited({"CRC": 40})  # the driver reloaded: 40 since
    (c, *_) = node_health.nvlink_error_checks(before, after, 120.0, "during the watch window")
    assert (c["ok"], c["value"], c["limit"]) == (True, 40, 12000)


def test_after_load_reads_the_nvlink_errors_when_the_load_starts_and_ends() -> None:
    xml = read_capture(H200_IDLE)
    links = read_capture("nvlink/brev-a100-sxm4-40gb-535-nvlink-s-i0.txt")
    gpu0_only = brev_errors().split("GPU 1:")[0]
    errors = [gpu0_only, gpu0_only.replace("Link 5: Replay Errors: 0", "Link 5: Replay Errors: 3")]
    calls: list[list[str]] = []

    def run_command(argv: list[str], **kwargs: Any) -> tuple[int, str, str]:
        calls.append(argv)
        if argv == ["dmesg"]:
            return 0, "[    0.000000] Linux version 6.8.0\n", ""
        if argv == ["nvidia-smi", "nvlink", "-e"]:
            return 0, errors.pop(0), ""
        if argv == ["nvidia-smi", "nvlink", "-s"]:
            return 0, links, ""
        assert argv == ["nvidia-smi", "-q", "-x"], argv
        return 0, xml, ""

    options = {"nvlink": True}
    after = node_health.AfterLoad(
        run_command, "nvidia-smi", "dmesg", options, "burn_in.health", "during the burn-in"
    )
    after.start()
    after.stop()
    c = by_name(after.checks())["health.nvlink_errors[GPU-fde0a018-ad1a-bbec-ccf6-50a9f64bd178]"]
    assert (c["ok"], c["value"], c["limit"]) == (False, 3, 0) and errors == []
    # the kernel log first when the load starts and last when it ends
    assert calls[0] == ["dmesg"] and calls[-1] == ["dmesg"]


def test_the_watch_judges_and_publishes_the_windows_nvlink_errors() -> None:
    xml = read_capture(H200_IDLE)
    h200_links = f"GPU 0: NVIDIA H200 (UUID: {H200})\n" + "".join(
        f"\t Link {n}: 26.562 GB/s\n" for n in range(18)
    )

    def errors(crc: int) -> str:
        return f"GPU 0: NVIDIA H200 (UUID: {H200})\n" + "".join(
            f"\t Link {n}: Replay Errors: 0\n\t Link {n}: Recovery Errors: 0\n"
            f"\t Link {n}: CRC Errors: {crc if n == 3 else 0}\n\n"
            for n in range(18)
        )

    reads = [errors(0), errors(7000)]

    def run_command(argv: list[str], **kwargs: Any) -> tuple[int, str, str]:
        if argv[1:] == ["nvlink", "-e"]:
            return 0, reads.pop(0), ""
        if argv[1:] == ["nvlink", "-s"]:
            return 0, h200_links, ""
        return 0, xml, ""

    w = watch.Watch(run_command, "nvidia-smi", 5.0, {}, [], [], health={"nvlink": True})
    found, fact = w._health(w._health_start(), 5.0)
    c = by_name(found)[f"health.nvlink_errors[{H200}]"]
    assert (c["ok"], c["value"], c["limit"]) == (False, 7000, 6000) and reads == []
    assert "during the watch window (5 s)" in c["message"]
    assert fact["gpus"][0]["nvlink_errors_per_minute"] == {"crc": 84000.0, "replay": 0.0, "recovery": 0.0}
