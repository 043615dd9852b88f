"""gpufleet.node.rdma_qos over a fake sysfs root: exact argv per command, changes, read-back, refusals.

The node is a b300-16 as the simulator renders it (sysfs_rdma), and each command the module runs
is answered by the simulator's fake tool of that name, so what the module reads and writes is in
the real formats end to end.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import rdma_read
from ansible_collections.gpufleet.node.plugins.modules import rdma_qos
from gpufleet_sim import state
from gpufleet_sim.tools import ethtool, mlnx_qos

from tests.unit.modules import harness, rdmanode

TOOLS: dict[str, Any] = {"mlnx_qos": mlnx_qos, "ethtool": ethtool}
BIN = rdmanode.BIN
IF = "ens21np0"
QOS = f"{BIN}/mlnx_qos"
ETHTOOL = f"{BIN}/ethtool"
FULL = {
    "interface": IF,
    "trust": "dscp",
    "pfc_priorities": [3],
    "ecn_priorities": [3],
    "cnp_dscp": 48,
    "global_pause": False,
}
# MLNX_OFED 4.2 community page DOC-2792 "mlnx_qos": the oldest layout, no DCBX/trust lines.
QOS_OLDEST = "PFC configuration:\n\npriority 0 1 2 3 4 5 6 7\n\nenabled 0 0 0 1 0 0 0 0\n"


class Node(rdmanode.RdmaNode):
    """The RDMA node, with what these tests look at."""

    def nic(self, netdev: str = IF) -> dict[str, Any]:
        found: dict[str, Any] = next(n for n in state.load(self.root)["nics"] if n["netdev"] == netdev)
        return found

    def ecn(self, netdev: str = IF) -> dict[str, Any]:
        return rdma_read.read_ecn(netdev, str(self.root))


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Node:
    return rdmanode.install(Node(tmp_path, TOOLS), monkeypatch)


def run_module(args: dict[str, Any]) -> dict[str, Any]:
    return harness.run_module(rdma_qos.main, {"boot_unit": False, **args}, expect=harness.ExitJson).result


def fail_module(args: dict[str, Any]) -> dict[str, Any]:
    return harness.run_module(rdma_qos.main, {"boot_unit": False, **args}, expect=harness.FailJson).result


def ecn_path(node: Node, point: str, prio: int, netdev: str = IF) -> str:
    return f"{node.root}/sys/class/net/{netdev}/ecn/{point}/enable/{prio}"


READS = [[ETHTOOL, "-a", IF], [QOS, "-i", IF]]


# ------------------------------------------------------------------ tuned node: nothing to do


def test_tuned_interface_is_left_alone(node: Node) -> None:
    before = node.snapshot()
    result = run_module(FULL)
    assert result["changed"] is False
    assert result["changes"] == [] and result["checks"] == [] and result["reboot_required"] is False
    assert node.calls == READS
    assert node.envs == [{"LC_ALL": "C"}] * 2
    assert result["interfaces"][IF]["ibdev"] == "mlx5_0"
    assert result["interfaces"][IF]["state"] == {
        "global_pause": False,
        "trust": "dscp",
        "pfc": [3],
        "ecn_np": [3],
        "ecn_rp": [3],
        "cnp_dscp": 48,
    }
    assert node.snapshot() == before


def test_boot_commands_reapply_every_managed_setting(node: Node) -> None:
    ecn = f"{node.root}/sys/class/net/{IF}/ecn"
    lines = run_module(FULL)["boot_commands"]
    assert lines[:2] == [
        f"{ETHTOOL} -A {IF} rx off tx off",
        f"{QOS} -i {IF} --trust dscp --pfc 0,0,0,1,0,0,0,0",
    ]
    assert lines[2:] == [
        *[f"echo {int(p == 3)} > {ecn}/roce_np/enable/{p}" for p in range(8)],
        *[f"echo {int(p == 3)} > {ecn}/roce_rp/enable/{p}" for p in range(8)],
        f"echo 48 > {ecn}/roce_np/cnp_dscp",
    ]


# ------------------------------------------------------------------ faults the role fixes


def test_pfc_off_sets_pfc_only_and_reads_it_back(node: Node) -> None:
    node.fault("pfc-off")
    result = run_module(FULL)
    assert result["changed"] is True
    assert result["changes"] == [{"setting": f"rdma_qos.pfc[{IF}]", "from": [], "to": [3]}]
    # read, set, read back; then the fresh read of every interface after the run (a setting that went back)
    assert node.calls == [*READS, [QOS, "-i", IF, "--pfc", "0,0,0,1,0,0,0,0"], *READS, *READS]
    assert node.nic()["pfc"] == [0, 0, 0, 1, 0, 0, 0, 0]
    assert result["interfaces"][IF]["state"]["pfc"] == [3]


def test_a_setting_that_goes_back_right_after_the_run_fails_it(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fresh read after a run that changed something (what the role's verify step read): PFC that
    firmware DCBX turns off again once set fails the module, naming it."""
    plan, reads = rdma_qos.role.plan, []

    def dcbx_turns_pfc_off_again(module: Any, params: Any) -> Any:
        reads.append(1)
        if len(reads) == 2:
            node.fault("pfc-off")
        return plan(module, params)

    monkeypatch.setattr(rdma_qos.role, "plan", dcbx_turns_pfc_off_again)
    node.fault("pfc-off")
    failed = fail_module(FULL)
    assert failed["msg"].startswith(f"not lossless: rdma_qos.pfc[{IF}] went back right after being set")
    assert failed["went_back"] == [{"setting": f"rdma_qos.pfc[{IF}]", "from": [], "to": [3]}]
    assert failed["changes"] == [{"setting": f"rdma_qos.pfc[{IF}]", "from": [], "to": [3]}]


def test_second_run_changes_nothing(node: Node) -> None:
    node.fault("pfc-off")
    node.fault("ecn-off")
    assert run_module(FULL)["changed"] is True
    node.calls.clear()
    again = run_module(FULL)
    assert (again["changed"], again["changes"]) == (False, [])
    assert node.calls == READS


def test_ecn_off_writes_the_two_priority_3_files(node: Node) -> None:
    node.fault("ecn-off")
    result = run_module(FULL)
    assert result["changes"] == [
        {"setting": f"rdma_qos.ecn_np[{IF}]", "from": [], "to": [3]},
        {"setting": f"rdma_qos.ecn_rp[{IF}]", "from": [], "to": [3]},
    ]
    assert node.calls == READS * 3  # read, no command to set ECN, read back, the fresh read after the run
    assert node.ecn() == {"np": [p == 3 for p in range(8)], "rp": [p == 3 for p in range(8)], "cnp_dscp": 48}


def test_ecn_on_other_priorities_is_turned_off(node: Node) -> None:
    Path(ecn_path(node, "roce_np", 5)).write_text("1\n")
    result = run_module(FULL)
    assert result["changes"] == [{"setting": f"rdma_qos.ecn_np[{IF}]", "from": [3, 5], "to": [3]}]
    assert Path(ecn_path(node, "roce_np", 5)).read_text() == "0\n"


def test_pcp_trust_and_cnp_dscp(node: Node) -> None:
    with state.locked(node.root) as current:
        current["nics"][0]["trust"] = "pcp"
    (node.root / "sys" / "class" / "net" / IF / "ecn" / "roce_np" / "cnp_dscp").write_text("0\n")
    result = run_module(FULL)
    assert result["changes"] == [
        {"setting": f"rdma_qos.trust[{IF}]", "from": "pcp", "to": "dscp"},
        {"setting": f"rdma_qos.cnp_dscp[{IF}]", "from": 0, "to": 48},
    ]
    assert node.calls[2] == [QOS, "-i", IF, "--trust", "dscp"]
    assert node.nic()["trust"] == "dscp"
    assert node.ecn()["cnp_dscp"] == 48


def test_global_pause_is_turned_off_first(node: Node) -> None:
    node.fault("pfc-off")
    with state.locked(node.root) as current:
        current["nics"][0]["pause"] = {"rx": True, "tx": True}
    result = run_module(FULL)
    assert [c["setting"] for c in result["changes"]] == [
        f"rdma_qos.global_pause[{IF}]",
        f"rdma_qos.pfc[{IF}]",
    ]
    assert result["changes"][0] == {"setting": f"rdma_qos.global_pause[{IF}]", "from": True, "to": False}
    assert node.calls[2:4] == [
        [ETHTOOL, "-A", IF, "rx", "off", "tx", "off"],
        [QOS, "-i", IF, "--pfc", "0,0,0,1,0,0,0,0"],
    ]
    assert node.nic()["pause"] == {"rx": False, "tx": False}


def test_half_on_global_pause_is_named(node: Node) -> None:
    with state.locked(node.root) as current:
        current["nics"][0]["pause"] = {"rx": True, "tx": False}
    result = run_module(FULL)
    assert result["changes"] == [
        {"setting": f"rdma_qos.global_pause[{IF}]", "from": "rx on, tx off", "to": False}
    ]


# ------------------------------------------------------------------ check mode and diff


def test_check_mode_reports_the_changes_and_writes_nothing(node: Node) -> None:
    node.fault("pfc-off")
    node.fault("ecn-off")
    before = node.snapshot()
    checked = run_module({**FULL, "_ansible_check_mode": True, "_ansible_diff": True})
    assert checked["changed"] is True
    assert [c["setting"] for c in checked["changes"]] == [
        f"rdma_qos.pfc[{IF}]",
        f"rdma_qos.ecn_np[{IF}]",
        f"rdma_qos.ecn_rp[{IF}]",
    ]
    assert node.calls == READS
    assert node.snapshot() == before
    assert checked["diff"][0]["before"] == (
        "global_pause: False\ntrust: dscp\npfc: []\necn_np: []\necn_rp: []\ncnp_dscp: 48\n"
    )
    assert checked["diff"][0]["after"] == (
        "global_pause: False\ntrust: dscp\npfc: [3]\necn_np: [3]\necn_rp: [3]\ncnp_dscp: 48\n"
    )
    # what check mode promised is what a run does
    applied = run_module(FULL)
    assert applied["changes"] == checked["changes"]


# ------------------------------------------------------------------ only what is given


def test_only_trust_and_pfc_touch_nothing_else(node: Node) -> None:
    node.fault("pfc-off")
    node.fault("ecn-off")
    node.installed.discard("ethtool")
    result = run_module({"interface": IF, "trust": "dscp", "pfc_priorities": [3]})
    assert result["changes"] == [{"setting": f"rdma_qos.pfc[{IF}]", "from": [], "to": [3]}]
    # read, set, read back, and the fresh read after the run
    read = [QOS, "-i", IF]
    assert node.calls == [read, [QOS, "-i", IF, "--pfc", "0,0,0,1,0,0,0,0"], read, read]
    assert node.ecn()["np"] == [False] * 8  # ECN left as it was
    assert result["interfaces"][IF]["state"] == {"trust": "dscp", "pfc": [3]}
    assert result["boot_commands"] == [f"{QOS} -i {IF} --trust dscp --pfc 0,0,0,1,0,0,0,0"]


def test_only_ecn_needs_no_tool(node: Node) -> None:
    node.fault("ecn-off")
    node.installed.clear()
    result = run_module({"interface": IF, "ecn_priorities": [3]})
    assert len(result["changes"]) == 2 and node.calls == []


def test_empty_pfc_list_turns_pfc_off(node: Node) -> None:
    result = run_module({"interface": IF, "pfc_priorities": []})
    assert result["changes"] == [{"setting": f"rdma_qos.pfc[{IF}]", "from": [3], "to": []}]
    assert node.calls[1] == [QOS, "-i", IF, "--pfc", "0,0,0,0,0,0,0,0"]


# ------------------------------------------------------------------ refused before any change


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("pfc_priorities", [3, 8], "pfc_priorities: 8 is not a priority; priorities are 0..7"),
        ("ecn_priorities", [-1], "ecn_priorities: -1 is not a priority; priorities are 0..7"),
        ("cnp_dscp", 64, "cnp_dscp: 64 is not a DSCP; DSCP values are 0..63"),
    ],
)
def test_out_of_range_values_are_refused_before_any_command(
    node: Node, option: str, value: Any, message: str
) -> None:
    node.fault("pfc-off")
    before = node.snapshot()
    failed = fail_module({**FULL, option: value})
    assert failed["msg"].startswith(message)
    assert node.calls == [] and node.snapshot() == before


def test_unknown_interface_is_refused_naming_the_interfaces(node: Node) -> None:
    failed = fail_module({**FULL, "interface": "eth9"})
    assert failed["msg"].startswith(
        "interfaces: eth9 is not an mlx5 RoCE interface on this node; it has: ens21np0 (mlx5_0),"
    )
    assert "ens21np0 (mlx5_0)" in failed["msg"] and "ens200np0 (mlx5_7)" in failed["msg"]
    assert node.calls == []


def test_global_pause_with_pfc_is_refused(node: Node) -> None:
    failed = fail_module({**FULL, "global_pause": True})
    assert failed["msg"].startswith("global_pause: true with pfc_priorities [3]")
    assert node.calls == []


# ------------------------------------------------------------------ read-back and tool failures


def test_a_setting_that_does_not_take_fails_the_module(node: Node) -> None:
    node.fault("pfc-off")
    # a NIC whose firmware ignores the PFC request: mlnx_qos succeeds, the state stays
    node.override["mlnx_qos"] = lambda args: (
        run_fake(node, args[:3]) if "--pfc" in args else None  # run without the --pfc option
    )
    failed = fail_module(FULL)
    assert failed["msg"].startswith(f"{IF} did not take: rdma_qos.pfc[{IF}] reads [] after setting [3]")
    assert failed["changes"] == [{"setting": f"rdma_qos.pfc[{IF}]", "from": [], "to": [3]}]


def run_fake(node: Node, args: list[str]) -> tuple[int, str, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = TOOLS[os.path.basename(args[0])].main(args[1:], node.root)
    return rc, out.getvalue(), ""


def test_mlnx_qos_failure_names_the_command(node: Node) -> None:
    node.override["mlnx_qos"] = lambda args: (1, "Netlink error: No such device (19)\n", "")
    failed = fail_module(FULL)
    assert failed["cmd"] == [QOS, "-i", IF] and failed["rc"] == 1
    assert failed["msg"].startswith(f"{QOS} -i {IF} failed (rc=1): Netlink error: No such device (19).")


def test_missing_mlnx_qos_fails(node: Node) -> None:
    node.installed.discard("mlnx_qos")
    assert "mlnx_qos" in fail_module(FULL)["msg"]


def test_missing_ecn_files_fail_naming_them(node: Node) -> None:
    ecn = node.root / "sys" / "class" / "net" / IF / "ecn"
    ecn.rename(ecn.with_name("ecn.off"))
    failed = fail_module({"interface": IF, "ecn_priorities": [3]})
    assert failed["msg"].startswith(f"{IF} has no ecn/roce_np/enable, ecn/roce_rp/enable under")


# ------------------------------------------------------------------ real and older mlnx_qos layouts


def test_real_cx7_capture_pfc_on_priority_5(node: Node, read_fixture: Callable[[str], str]) -> None:
    capture = read_fixture("mellanox/3fs-doc-mlnx_qos-ens4np0-cx7-ofed23.10.txt")
    node.override["mlnx_qos"] = lambda args: (0, capture, "")
    checked = run_module(
        {"interface": IF, "trust": "dscp", "pfc_priorities": [3], "_ansible_check_mode": True}
    )
    assert checked["changes"] == [{"setting": f"rdma_qos.pfc[{IF}]", "from": [5], "to": [3]}]


def test_oldest_layout_reads_pfc_but_refuses_trust(node: Node) -> None:
    node.override["mlnx_qos"] = lambda args: (0, QOS_OLDEST, "")
    assert run_module({"interface": IF, "pfc_priorities": [3]})["changes"] == []
    failed = fail_module({"interface": IF, "trust": "dscp", "pfc_priorities": [3]})
    assert failed["msg"].startswith(f"mlnx_qos -i {IF} does not show a priority trust state")


def test_firmware_dcbx_is_a_hint(node: Node, read_fixture: Callable[[str], str]) -> None:
    capture = read_fixture("mellanox/3fs-doc-mlnx_qos-ens4np0-cx7-ofed23.10.txt")
    capture = capture.replace("DCBX mode: OS controlled", "DCBX mode: FW controlled")
    node.override["mlnx_qos"] = lambda args: (0, capture, "")
    checked = run_module({"interface": IF, "pfc_priorities": [5], "_ansible_check_mode": True})
    assert checked["hints"] == [
        f"{IF}: DCBX mode is FW controlled, so the switch (LLDP) can override trust and PFC"
    ]


def test_switch_snippet_is_a_read_only_hint(node: Node) -> None:
    result = run_module({**FULL, "switch_snippet": True})
    assert result["switch_config"] == [
        "# switch side (Cumulus Linux NVUE), for comparison only: gpufleet does not apply it",
        "nv set qos roce mode lossless",
        "nv set qos mapping default-global trust l3",
        "nv set qos pfc default-global switch-priority 3",
        "nv set qos congestion-control default-global traffic-class 3 ecn enable",
        "nv config apply",
    ]
    assert result["hints"] == ["; ".join(result["switch_config"])]
    assert run_module(FULL)["hints"] == []


NETDEVS = ["ens21np0", "ens38np0", "ens55np0", "ens72np0", "ens149np0", "ens166np0", "ens183np0", "ens200np0"]
SYSTEMCTL = f"{BIN}/systemctl"
BOOT_UNIT = "gpufleet-rdma-qos.service"


def test_every_roce_interface_with_manage_and_one_boot_script(node: Node, boot_root: Path) -> None:
    """No interface named: every mlx5 Ethernet port; manage leaves global pause out (not read, not in
    the boot script); the script and unit are written once, checked with sh -n, the unit enabled."""
    enabled: list[str] = []
    node.installed |= {"systemctl", "sh"}
    node.override["systemctl"] = lambda argv: (
        ((0, "enabled\n", "") if enabled else (1, "disabled\n", ""))
        if argv[1] == "is-enabled"
        else (enabled.append(argv[-1]) or (0, "", ""))
        if argv[1] == "enable"
        else (0, "", "")
    )
    node.override["sh"] = lambda argv: (0, "", "")
    args = {**FULL, "boot_unit": True, "manage": ["trust", "pfc", "ecn", "cnp_dscp"]}
    del args["interface"]
    result = run_module(args)
    assert list(result["interfaces"]) == NETDEVS
    assert ETHTOOL not in {c[0] for c in node.calls}
    is_enabled = [SYSTEMCTL, "is-enabled", BOOT_UNIT]
    # after the run, a fresh read of every interface and of the boot unit (a setting that went back)
    read_back = [*[[QOS, "-i", n] for n in NETDEVS], is_enabled]
    assert node.calls[-len(read_back) :] == read_back
    written = node.calls[: -len(read_back)]
    assert written[-4:] == [
        is_enabled,
        [f"{BIN}/sh", "-n", written[-3][2]],
        [SYSTEMCTL, "daemon-reload"],
        [SYSTEMCTL, "enable", BOOT_UNIT],
    ]
    script = (boot_root / "etc/gpufleet/rdma-qos.sh").read_text()
    assert script.startswith("# managed by gpufleet.node.rdma_qos; edits are overwritten\n")
    assert [line for line in script.splitlines() if line.startswith("# ens")] == [
        f"# {n} (mlx5_{i})" for i, n in enumerate(NETDEVS)
    ]
    assert f"{QOS} -i ens200np0 --trust dscp --pfc 0,0,0,1,0,0,0,0 || rc=1" in script
    assert "ethtool" not in script
    assert [c["setting"] for c in result["changes"][-3:]] == [
        "rdma_qos.boot_file[/etc/gpufleet/rdma-qos.sh]",
        f"rdma_qos.boot_file[/etc/systemd/system/{BOOT_UNIT}]",
        f"rdma_qos.boot_unit_enabled[{BOOT_UNIT}]",
    ]
    node.calls.clear()
    again = run_module(args)
    assert again["changed"] is False and node.calls[-1] == is_enabled
