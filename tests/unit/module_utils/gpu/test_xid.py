"""xid: Xid events from real kernel logs (tests/fixtures/real/xid, INDEX.md) and the Xid table."""

from __future__ import annotations

import collections

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import xid

from tests.unit.mutations import read_capture

GSP_119 = "xid/gpud-dmesg-with-xid-119.log"
MEMORY_48_63_94 = "xid/gpud-dmesg-time-format-iso-xid-48-63-94.log"
APP_13_43 = "xid/gpud-dmesg-decode-iso-xid-13-43.log"
OFF_THE_BUS_79 = "xid/gpud-sxid-readme-xid-79-quoted.txt"


def log(capture: str) -> str:
    """Two of gpud's test logs were saved without the newline dmesg ends its last line with."""
    text = read_capture(capture)
    return text if text.endswith("\n") else text + "\n"


def test_gsp_timeouts_xid_119_with_pid_and_process() -> None:
    events = xid.parse_kernel_log(log(GSP_119))
    assert [e["xid"] for e in events] == [119] * 5
    first = events[0]
    assert (first["pci_bus_id"], first["pid"], first["process"], first["line"]) == (
        "0000:9b:00",
        2024380,
        "nvidia-smi",
        3,
    )
    assert first["timestamp"] == "Sun Feb 23 16:24:18 2025"
    assert first["message"].startswith("Timeout after 6s of waiting for RPC response from GPU4 GSP!")
    assert xid.describe(119).severity == "block"


def test_memory_errors_48_63_94_in_iso_time() -> None:
    events = xid.parse_kernel_log(log(MEMORY_48_63_94))
    assert collections.Counter(e["xid"] for e in events) == {48: 1, 63: 1, 94: 9}
    dbe, remap = events[0], events[1]
    assert (dbe["xid"], dbe["pid"], dbe["process"], dbe["timestamp"]) == (
        48,
        None,
        None,
        "2024-11-15T12:02:03,470068+00:00",
    )
    assert (
        remap["message"]
        == "Row Remapper: New row (0x00000012bac1c3e0) marked for remapping, reset gpu to activate."
    )
    assert events[-1]["process"] == "python3.10" and events[-1]["message"] == "Ch 0000000f"
    assert {e["pci_bus_id"] for e in events} == {"0000:19:00"}
    assert [xid.describe(n).severity for n in (48, 63, 94)] == ["block", "block", "warn"]


def test_application_xids_13_and_43_in_a_decoded_log() -> None:
    events = xid.parse_kernel_log(log(APP_13_43))
    assert collections.Counter(e["xid"] for e in events) == {13: 629, 43: 7}
    assert events[0]["message"] == "Graphics SM Warp Exception on (GPC 8, TPC 5, SM 0): Out Of Range Address"
    last = events[-1]
    assert (last["xid"], last["pid"], last["process"], last["line"]) == (43, 2924364, "pt_main_thread", 636)
    assert all(xid.describe(e["xid"]).severity == "warn" for e in events)


def test_fallen_off_the_bus_79_in_seconds_since_boot() -> None:
    (event,) = xid.parse_kernel_log(log(OFF_THE_BUS_79))
    assert (event["xid"], event["pci_bus_id"], event["timestamp"], event["message"]) == (
        79,
        "0000:91:00",
        "6781741.548779",
        "GPU has fallen off the bus.",
    )
    assert xid.describe(79).severity == "block" and "reboot" in xid.describe(79).action


def test_older_line_without_pid_and_journalctl_prefix() -> None:
    line = "May 18 19:02:39 host kernel: NVRM: Xid (PCI:0000:2B:00): 79, GPU has fallen off the bus.\n"
    (event,) = xid.parse_kernel_log("May 18 19:02:39 host kernel: NVRM: GPU at PCI:0000:2b:00\n" + line)
    assert (event["pci_bus_id"], event["pid"], event["timestamp"]) == ("0000:2b:00", None, "May 18 19:02:39")


def test_a_log_without_xid_is_an_empty_list() -> None:
    assert xid.parse_kernel_log("[    0.000000] Linux version 6.8.0\n") == []


def test_catalog_covers_the_issues_xids() -> None:
    needed = {13, 31, 43, 45, 48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95, 119, 120, 140}
    assert needed <= set(xid.XID_CATALOG)
    assert {info.severity for info in xid.XID_CATALOG.values()} == {"block", "warn"}
    assert all(info.meaning and info.action for info in xid.XID_CATALOG.values())
    assert xid.describe(9999) is xid.UNKNOWN


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda t: t.replace("): 48, pid=", "): \u0664\u0668, pid=", 1), "a digit that is not 0-9"),
        (lambda t: t.replace("): 48, pid='<unknown>', name", "): 48, pid='<unk', name", 1), "pid/name"),
        (lambda t: t.replace("(PCI:0000:19:00): 63", "(PCI:0000:19): 63", 1), "does not read as one"),
        (lambda t: t.replace("python3.10, Ch 0000000f", "python3.10, Ch 0000000f\udcff"), "not UTF-8"),
        (lambda t: t.rstrip("\n"), "newline"),
        (lambda t: "", "empty"),
    ],
)
def test_damaged_xid_lines_are_refused(damage: object, why: str) -> None:
    with pytest.raises(xid.ParseError, match=r"^kernel log \(Xid\): .*" + why):
        xid.parse_kernel_log(damage(log(MEMORY_48_63_94)))  # type: ignore[operator]
