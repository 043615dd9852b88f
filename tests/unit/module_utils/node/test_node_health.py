"""node_health's judgement on real captures (the H200 and Blackwell -q -x, A100 nvlink -s, gpud's kernel
logs), then on the faults a maintenance window leaves behind, edited into those captures."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import gpu_health_readings, nvlink, xid
from ansible_collections.gpufleet.node.plugins.module_utils.node import node_health

from tests.unit.mutations import read_capture

H200_IDLE = "h200-device/nvidia-smi-q-x-idle.xml"
BLACKWELL = "nvidia-smi-xml/telegraf-pro-6000-maxq-blackwell-v13.xml"
A100_LINKS = "nvlink/brev-a100-sxm4-40gb-535-nvlink-s-i0.txt"
XID_48_63_94 = "xid/gpud-dmesg-time-format-iso-xid-48-63-94.log"
XID_13_43 = "xid/gpud-dmesg-decode-iso-xid-13-43.log"


def readings(
    xml: str = H200_IDLE, links: str | None = None, log: str | None = None, **edits: str
) -> dict[str, Any]:
    text = read_capture(xml)
    for old, new in edits.items():
        assert old in text, old
        text = text.replace(old, new)
    return {
        "gpus": gpu_health_readings.parse_health_xml(text),
        "links": None if links is None else nvlink.parse_status(links),
        "xids": None if log is None else xid.parse_kernel_log(log),
    }


def kernel_log(name: str) -> str:
    """A gpud kernel log capture; two were saved upstream without their last newline (INDEX.md)."""
    text = read_capture(name)
    return text if text.endswith("\n") else text + "\n"


def by_name(checks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in checks}


H200 = "GPU-2e6e9300-13a8-2712-b2c8-503aade81b40"


def test_a_healthy_real_h200_passes_every_check() -> None:
    checks = node_health.judge(readings(), expected_gpu_count=1)
    assert checks and all(c["ok"] for c in checks), [c for c in checks if not c["ok"]]
    assert set(by_name(checks)) == {
        "health.gpu_count",
        f"health.pcie_width[{H200}]",
        f"health.row_remap_pending[{H200}]",
        f"health.row_remap_failure[{H200}]",
        f"health.ecc_uncorrectable[{H200}]",
        f"health.recovery_action[{H200}]",
    }


def test_an_idle_gpu_at_gen1_of_gen5_with_full_width_passes_and_the_same_under_load_fails() -> None:
    """The real Blackwell capture: Gen1 at idle (its max 4), x16 of x16."""
    idle = by_name(node_health.judge(readings(BLACKWELL)))
    uuid = next(n for n in idle if n.startswith("health.pcie_width[")).split("[")[1][:-1]
    assert idle[f"health.pcie_width[{uuid}]"]["ok"] is True
    assert f"health.pcie_gen[{uuid}]" not in idle  # the generation is judged under load only
    loaded = by_name(node_health.judge(readings(BLACKWELL), under_load=True))
    gen = loaded[f"health.pcie_gen[{uuid}]"]
    assert (gen["ok"], gen["value"], gen["limit"]) == (False, 1, 4) and "under load" in gen["message"]


def test_a_degraded_link_fails_by_width() -> None:
    width = by_name(node_health.judge(readings(**{"<current_link_width>16x<": "<current_link_width>8x<"})))[
        f"health.pcie_width[{H200}]"
    ]
    assert (width["ok"], width["value"], width["limit"], width["unit"]) == (False, 8, 16, "lanes")
    assert "x8 of x16" in width["message"] and "reseat" in width["message"]


def test_a_pending_remap_and_uncorrectable_errors_fail_by_name() -> None:
    checks = by_name(
        node_health.judge(
            readings(
                **{
                    "<remapped_row_pending>No<": "<remapped_row_pending>Yes<",
                    "<dram_uncorrectable>0<": "<dram_uncorrectable>2<",
                }
            )
        )
    )
    assert checks[f"health.row_remap_pending[{H200}]"]["ok"] is False
    assert "reset the GPU" in checks[f"health.row_remap_pending[{H200}]"]["message"]
    ecc = checks[f"health.ecc_uncorrectable[{H200}]"]
    assert (ecc["ok"], ecc["value"], ecc["limit"]) == (False, 2, 0)
    # lifetime errors are judged only with a limit
    assert f"health.ecc_uncorrectable_aggregate[{H200}]" not in checks
    aggregate = by_name(
        node_health.judge(
            readings(**{"<dram_uncorrectable>0<": "<dram_uncorrectable>2<"}),
            limits={"max_aggregate_uncorrectable_ecc": 1},
        )
    )[f"health.ecc_uncorrectable_aggregate[{H200}]"]
    assert (aggregate["ok"], aggregate["value"], aggregate["limit"]) == (False, 2, 1)


def test_the_real_h200s_recovery_action_none_passes() -> None:
    """The real H200's -q -x (driver 580) reports <gpu_recovery_action>None</...>: nothing to do."""
    action = by_name(node_health.judge(readings()))[f"health.recovery_action[{H200}]"]
    assert (action["ok"], action["value"], action["limit"]) == (True, "None", "None")
    assert "no recovery action pending" in action["message"]


@pytest.mark.parametrize(
    ("action", "advice"),
    [
        ("GPU Reset", "reset it (nvidia-smi -r -i 0)"),
        ("Node Reboot", "drain the node and reboot it"),
        ("Drain P2P", "end every process using P2P on it, then reset the GPU"),
        ("Drain and Reset", "end every process using the GPU's peer-to-peer traffic, then reset the GPU"),
        ("Recover IMEX Domain", "an action this gate does not know"),
    ],
)
def test_a_recovery_action_other_than_none_fails_saying_what_to_do(action: str, advice: str) -> None:
    edit = {"<gpu_recovery_action>None<": f"<gpu_recovery_action>{action}<"}
    checks = node_health.judge(readings(**edit))
    failed = [c for c in checks if not c["ok"]]
    assert [c["name"] for c in failed] == [f"health.recovery_action[{H200}]"]
    (c,) = failed
    assert (c["value"], c["limit"]) == (action, "None")
    assert (
        f"{H200} (00000000:00:06.0, GPU 0)" in c["message"] and f"Recovery Action is {action}" in c["message"]
    )
    assert advice in c["message"]
    assert node_health.fact(readings(**edit))["gpus"][0]["recovery_action"] == action


def test_a_gpu_without_a_recovery_action_is_not_judged_on_it() -> None:
    """The real A100 (driver 535) has no <gpu_recovery_action>: unknown, not judged, not a pass."""
    checks = by_name(node_health.judge(readings("nvidia-smi-xml/telegraf-a100-sxm4-v12.xml")))
    assert not [n for n in checks if n.startswith("health.recovery_action[")]


def test_pcie_replays_rising_on_the_real_h200_fail_above_8_a_minute() -> None:
    """The real H200's replay_counter (0) read again with the counter edited up: 8 in a 30 s window
    pass (a minute's worth), 9 fail; over 2 minutes the limit is 16, so 17 fail; a counter that went
    down (a GPU reset) counts from 0; a GPU not read at the start is not judged."""
    before = readings()["gpus"]

    def after(count: int) -> list[dict[str, Any]]:
        return readings(**{"<replay_counter>0<": f"<replay_counter>{count}<"})["gpus"]

    (ok,) = node_health.pcie_replay_checks(before, after(8), 30.0, "during the burn-in")
    assert (ok["name"], ok["ok"], ok["value"], ok["limit"], ok["unit"]) == (
        f"health.pcie_replays[{H200}]",
        True,
        8,
        8,
        "replays",
    )
    (bad,) = node_health.pcie_replay_checks(before, after(9), 30.0, "during the burn-in")
    assert (bad["ok"], bad["value"], bad["limit"]) == (False, 9, 8)
    assert "replayed 9 packets during the burn-in (30 s), limit 8" in bad["message"]
    assert "reseat it" in bad["message"]
    (longer,) = node_health.pcie_replay_checks(before, after(17), 120.0, "during the burn-in")
    assert (longer["ok"], longer["value"], longer["limit"]) == (False, 17, 16)
    (reset,) = node_health.pcie_replay_checks(after(50), after(3), 30.0, "during the burn-in")
    assert (reset["ok"], reset["value"]) == (True, 3)
    assert node_health.pcie_replay_checks([], after(50), 30.0, "during the burn-in") == []


def test_a_gpu_missing_from_the_profile_fails_the_count() -> None:
    count = by_name(node_health.judge(readings(), expected_gpu_count=8))["health.gpu_count"]
    assert (count["ok"], count["value"], count["limit"]) == (False, 1, 8)
    assert "Xid 79" in count["message"]


def test_real_nvlink_status_all_active_and_one_link_down() -> None:
    text = read_capture(A100_LINKS)
    (gpu,) = nvlink.parse_status(text)
    reading = {
        "gpus": [{"uuid": gpu["uuid"], "pci_bus_id": None}],
        "links": nvlink.parse_status(text),
        "xids": None,
    }
    healthy = by_name(node_health.nvlink_checks(reading["gpus"], reading["links"]))[
        f"health.nvlink[{gpu['uuid']}]"
    ]
    assert (healthy["ok"], healthy["value"], healthy["limit"]) == (True, 12, 12)
    down = nvlink.parse_status(text.replace("Link 7: 25 GB/s", "Link 7: <inactive>"))
    failed = by_name(node_health.nvlink_checks(reading["gpus"], down))[f"health.nvlink[{gpu['uuid']}]"]
    assert (failed["ok"], failed["value"], failed["limit"]) == (False, 11, 12)
    assert "inactive: link 7" in failed["message"]


def test_real_xid_logs_block_or_warn_by_the_catalog() -> None:
    """gpud's log: Xid 48 (double bit error), 63 (row remap), 94 (contained) on 0000:19:00."""
    gpus = [{"uuid": "GPU-x", "pci_bus_id": "00000000:19:00.0"}]
    events = xid.parse_kernel_log(kernel_log(XID_48_63_94))
    (found,) = node_health.xid_checks(gpus, events)
    assert found["name"] == "health.xid[0000:19:00]" and found["ok"] is False and found["value"] == 48
    assert "GPU 0000:19:00 (GPU-x): Xid 48, 63, 94" in found["message"]
    assert xid.describe(48).meaning in found["message"]
    # 94 alone (contained ECC) warns: named, does not block
    only_94 = [e for e in events if e["xid"] == 94]
    (warned,) = node_health.xid_checks(gpus, only_94)
    assert warned["ok"] is True and warned["value"] == 94 and "does not block" in warned["message"]
    # a GPU nvidia-smi no longer lists is still named by its bus id
    (gone,) = node_health.xid_checks([], events)
    assert "a GPU nvidia-smi no longer lists" in gone["message"]
    assert node_health.xid_checks(gpus, xid.parse_kernel_log(kernel_log(XID_13_43)))


def test_a_family_turned_off_passes_with_its_reason() -> None:
    checks = by_name(
        node_health.judge(
            readings(**{"<current_link_width>16x<": "<current_link_width>8x<"}),
            off={"health.pcie_width": "riser known to report x8"},
        )
    )
    width = checks[f"health.pcie_width[{H200}]"]
    assert (
        width["ok"] is True
        and width["value"] == 8
        and "not judged: riser known to report x8" in width["message"]
    )


BOOT_LINE = "[    0.000000] Linux version 6.8.0-51-generic (buildd@lcy02-amd64-045)\n"


def test_after_load_judges_the_replays_between_the_loads_start_and_end() -> None:
    """The burn-in's AfterLoad: -q -x read when the load starts (replay_counter 0, the real H200) and
    when it ends (12): 12 replays in under a minute fail, named during the burn-in; a failed start read
    fails the burn-in's health check closed."""
    start = read_capture(H200_IDLE)
    xml = [start, start.replace("<replay_counter>0<", "<replay_counter>12<")]

    def run_command(argv: list[str], **kwargs: Any) -> tuple[int, str, str]:
        if argv == ["dmesg"]:
            return 0, BOOT_LINE, ""
        assert argv == ["nvidia-smi", "-q", "-x"], argv
        return 0, xml.pop(0), ""

    options = {"nvlink": False, "expected_gpu_count": 1}
    after = node_health.AfterLoad(
        run_command, "nvidia-smi", "dmesg", options, "burn_in.health", "during the burn-in"
    )
    after.start()
    after.stop()
    replays = by_name(after.checks())[f"health.pcie_replays[{H200}]"]
    assert (replays["ok"], replays["value"], replays["limit"]) == (False, 12, 8) and xml == []
    assert "replayed 12 packets during the burn-in" in replays["message"]

    def broken(argv: list[str], **kwargs: Any) -> tuple[int, str, str]:
        return (0, BOOT_LINE, "") if argv == ["dmesg"] else (9, "", "NVIDIA-SMI has failed")

    failed = node_health.AfterLoad(
        broken, "nvidia-smi", "dmesg", options, "burn_in.health", "during the burn-in"
    )
    failed.start()
    failed.stop()
    (only,) = failed.checks()
    assert (only["name"], only["ok"]) == ("burn_in.health", False)
    assert "PCIe replay counters could not be read when the load started" in only["message"]
