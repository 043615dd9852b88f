"""`gpufleet drift [--fix]` on a simulated fleet of eight b300-16 nodes (subnet 127.0.51).

Provisioned once; the first tests run on node01..node04 (--limit): clean drift (and a dead node
listed as unreachable; clean also says that drift renders the boot files byte for byte as provision
wrote them), a boot file edited by hand is named on its node only, faults on some nodes give exactly
their settings and match `provision --check` (the edited boot file too), a batched --fix drains,
fixes and undrains only the drifted nodes and restores the boot file, a second drift is clean, and a
batch over the failure limit stops the rollout with the remaining nodes reported as not reached. The
last test puts every fault drift can see on the whole fleet (faults that change settings of their own
share a node, each other fault has one; two nodes clean) and holds drift's {setting, from, to} to
`gpufleet check`'s on every node. Between them, node05..node08
(as provisioned) show drift naming the odd node out of its versions (firmware-mismatch on node06).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from gpufleet_sim import control
from gpufleet_sim.fleet import Fleet

from gpufleet import cli
from tests.browser import ARTIFACTS, open_page
from tests.integration import execution_node
from tests.integration.conftest import node_hosts, node_ssh, run_on

REPO = Path(__file__).resolve().parents[2]
NODES = ("node01", "node02", "node03", "node04")
ALL_NODES = tuple(f"node{i:02d}" for i in range(1, 9))
LIMIT = ["--limit", ",".join(NODES)]


@pytest.fixture(scope="module")
def fleet(fleet_factory) -> Fleet:
    started: Fleet = fleet_factory(nodes=len(ALL_NODES), subnet="127.0.51", slurm=True)
    return started


def inventory_dir(fleet: Fleet, name: str, extra: str) -> Path:
    """The fleet's inventory plus a file of extra hosts/vars (an inventory directory)."""
    directory = fleet.root / name
    directory.mkdir(exist_ok=True)
    for entry, target in (
        ("inventory.yml", fleet.inventory_path),
        ("group_vars", REPO / "inventory/sim/group_vars"),
    ):
        link = directory / entry
        if not link.exists():
            link.symlink_to(target)
    (directory / "zz-extra.yml").write_text(extra, encoding="utf-8")
    return directory


SLURM = "all:\n  children:\n    gpu_nodes:\n      vars:\n        gpufleet_drain_method: slurm\n"
DEAD = (
    "all:\n  children:\n    gpu_nodes:\n      hosts:\n        node99:\n          ansible_host: 127.0.51.250\n"
)


def run(fleet: Fleet, argv: list[str], report_dir: Path) -> tuple[int, dict[str, Any]]:
    # the fleet's vault secret: its leaves' and BMCs' passwords are vaulted
    vault = ["--vault-password-file", str(fleet.vault_password_file)]
    code = cli.main([*argv, *vault, "--report-dir", str(report_dir)])
    return code, json.loads((report_dir / "report.json").read_text())


def families(host: dict[str, Any]) -> set[str]:
    """A report host's drifted setting families (the heat map's columns: gpu_power.enforced_limit_w)."""
    return {str(c["setting"]).split("[")[0] for c in host["changes"]}


def changes(report: dict[str, Any], host: str) -> list[tuple[str, Any, Any]]:
    return sorted(
        (c["setting"], json.dumps(c["from"]), json.dumps(c["to"])) for c in report["hosts"][host]["changes"]
    )


def updates(fleet: Fleet, name: str) -> list[dict[str, Any]]:
    """The node's drains and resumes as the fleet's real slurmctld logged them, with their times
    (drift reads the node's state too, through the real `scontrol show node`)."""
    return fleet.slurm.changes(name)


def calls(fleet: Fleet, name: str) -> list[tuple[object, object]]:
    return [(c["state"], c.get("reason")) for c in updates(fleet, name)]


@pytest.fixture(scope="module")
def provisioned(fleet: Fleet, tmp_path_factory: pytest.TempPathFactory) -> Path:
    report_dir = tmp_path_factory.mktemp("provision")
    code, report = run(fleet, ["provision", "--inventory", str(fleet.inventory_path)], report_dir)
    assert code == 0, report
    return inventory_dir(fleet, "inv-slurm", SLURM)


def test_clean_fleet_and_an_unreachable_node(fleet: Fleet, provisioned: Path, tmp_path: Path) -> None:
    dead = inventory_dir(fleet, "inv-dead", DEAD)
    code, report = run(
        fleet, ["drift", "--inventory", str(dead), "--limit", ",".join([*NODES, "node99"])], tmp_path
    )
    assert code == 1
    statuses = {name: host["status"] for name, host in node_hosts(report).items()}
    assert statuses == {**dict.fromkeys(NODES, "ok"), "node99": "unreachable"}
    assert all(report["hosts"][n]["changes"] == [] for n in NODES)


CONF = "gpufleet/gpu-power.conf"  # under the node's /etc
CONF_SETTING = f"gpu_power.boot_file[/etc/{CONF}]"


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()[:16]


@pytest.fixture(scope="module")
def edited_conf(fleet: Fleet, provisioned: Path) -> tuple[bytes, bytes]:
    """node04's boot-time power limits lowered to 1100 W by hand (in its /etc's overlay upper dir):
    the limit the next boot would apply. (as provisioned, as edited)."""
    path = fleet.root / "nodes" / "node04" / "etc-upper" / CONF
    written = path.read_bytes()
    lines = written.decode().splitlines(keepends=True)
    edited = "".join(x if x.startswith("#") else x.split()[0] + " 1100\n" for x in lines).encode()
    assert edited != written
    path.write_bytes(edited)
    return written, edited


def test_an_edited_boot_file_is_named_on_its_node_only(
    fleet: Fleet, edited_conf: tuple[bytes, bytes], tmp_path: Path
) -> None:
    written, edited = edited_conf
    code, report = run(fleet, ["drift", "--inventory", str(fleet.inventory_path), *LIMIT], tmp_path)
    assert code == 1
    assert report["hosts"]["node04"]["status"] == "drifted"
    assert report["hosts"]["node04"]["changes"] == [
        {"setting": CONF_SETTING, "from": digest(edited), "to": digest(written)}
    ]
    for name in NODES[:3]:
        assert (report["hosts"][name]["status"], report["hosts"][name]["changes"]) == ("ok", []), name


def test_drift_names_exactly_the_faulted_settings_and_fix_clears_them(
    fleet: Fleet, provisioned: Path, edited_conf: tuple[bytes, bytes], tmp_path: Path
) -> None:
    control.fault(fleet, "node02", "pfc-off", clear=False)
    control.fault(fleet, "node03", "power-capped", clear=False)
    control.fault(fleet, "node03", "stale-nccl-topo", clear=False)
    control.fault(fleet, "node04", "ecn-off", clear=False)
    inventory = str(provisioned)

    code, drift = run(fleet, ["drift", "--inventory", inventory, *LIMIT], tmp_path / "drift")
    assert code == 1
    assert drift["hosts"]["node01"]["status"] == "ok"
    assert drift["hosts"]["node01"]["changes"] == []
    assert drift["hosts"]["node01"]["checks"] and all(c["ok"] for c in drift["hosts"]["node01"]["checks"])
    assert {n: drift["hosts"][n]["status"] for n in NODES[1:]} == dict.fromkeys(NODES[1:], "drifted")
    assert all(c[0].startswith("rdma_qos.pfc[") for c in changes(drift, "node02"))
    assert {c[0].split("[")[0] for c in changes(drift, "node03")} == {
        "gpu_power.enforced_limit_w",
        "nccl_topology.file",
    }
    assert {c[0].split("[")[0] for c in changes(drift, "node04")} == {
        "rdma_qos.ecn_np",
        "rdma_qos.ecn_rp",
        "gpu_power.boot_file",
    }
    written, edited = edited_conf
    assert (CONF_SETTING, json.dumps(digest(edited)), json.dumps(digest(written))) in changes(drift, "node04")
    markdown = (tmp_path / "drift" / "report.md").read_text()
    setting = drift["hosts"]["node02"]["changes"][0]["setting"]
    assert f"| {setting} | 1 node |" in markdown
    # the page: one heat-map cell per node x drifted setting family, opened in a real headless Chromium
    page = open_page(tmp_path / "drift" / "report.html", ARTIFACTS / "drift-report.png")
    assert page.console == [] and page.page_errors == [] and page.external_requests() == []
    assert page.cells == sum(len(families(h)) for h in drift["hosts"].values())
    assert page.cells > 3 and setting.split("[")[0] in page.columns

    # The anchor: provision --check finds the same settings, from and to, on the same nodes (the
    # boot file too: its template task's change is in provision's report under drift's name).
    code, check = run(
        fleet,
        ["provision", "--check", "--inventory", inventory, "--limit", "node02,node03,node04"],
        tmp_path / "check",
    )
    for name in NODES[1:]:
        assert changes(check, name) == changes(drift, name), name

    for name in NODES:
        before = calls(fleet, name)
        assert before == [], (name, before)
    code, fixed = run(
        fleet, ["drift", "--fix", "--batch", "2", "--inventory", inventory, *LIMIT], tmp_path / "fix"
    )
    assert code == 0, fixed
    assert {n: fixed["hosts"][n]["status"] for n in NODES} == {
        "node01": "ok",
        **dict.fromkeys(NODES[1:], "changed"),
    }
    assert calls(fleet, "node01") == []
    for name in NODES[1:]:
        assert calls(fleet, name) == [("drain", "gpufleet drift --fix"), ("resume", None)]
        assert "Reason" not in fleet.slurm.wait_state(name, "IDLE"), name
    # batches: [node02, node03], then [node04]
    first = [updates(fleet, n) for n in ("node02", "node03")]
    node04 = updates(fleet, "node04")
    assert max(c[1]["time"] for c in first) <= node04[0]["time"], "batch 2 started before batch 1 ended"

    assert (fleet.root / "nodes" / "node04" / "etc-upper" / CONF).read_bytes() == written

    code, again = run(fleet, ["drift", "--inventory", inventory, *LIMIT], tmp_path / "again")
    assert code == 0, again
    assert {n: again["hosts"][n]["status"] for n in NODES} == dict.fromkeys(NODES, "ok")


def test_a_failed_batch_stops_the_rollout(fleet: Fleet, provisioned: Path, tmp_path: Path) -> None:
    control.fault(fleet, "node01", "link-down", clear=False)
    control.fault(fleet, "node01", "pfc-off", clear=False)
    control.fault(fleet, "node02", "pfc-off", clear=True)  # the earlier test's fault, fixed since
    control.fault(fleet, "node02", "pfc-off", clear=False)
    argv = [
        "drift",
        "--fix",
        "--batch",
        "1",
        "--max-fail-percent",
        "0",
        "--inventory",
        str(provisioned),
        *LIMIT,
    ]
    code, report = run(fleet, argv, tmp_path)
    assert code == 1
    assert report["hosts"]["node01"]["status"] == "failed"
    assert "left drained" in report["hosts"]["node01"]["message"]
    assert report["hosts"]["node02"]["status"] == "blocked"
    assert report["hosts"]["node02"]["message"].startswith("not reached: rollout stopped after batch 1")
    assert {report["hosts"][n]["status"] for n in ("node03", "node04")} == {"ok"}
    # node01 was drained and, having failed, stays drained; node02 was never touched.
    assert calls(fleet, "node01")[-1] == ("drain", "gpufleet drift --fix")
    slurm_node = fleet.slurm.node("node01")
    assert (slurm_node["State"], slurm_node.get("Reason")) == ("IDLE+DRAIN", "gpufleet drift --fix")
    assert len(calls(fleet, "node02")) == 2
    # the next run names the node it finds left drained (the drain role's record on the node)
    code, again = run(fleet, ["drift", "--inventory", str(provisioned), *LIMIT], tmp_path / "again")
    assert code == 1
    left = {
        n: [c for c in h["checks"] if c["name"] == "drain.left_drained"] for n, h in again["hosts"].items()
    }
    assert [(c["ok"], c["value"]) for c in left["node01"]] == [(False, "slurm: gpufleet drift --fix")]
    assert all(not left[n] for n in ("node02", "node03", "node04"))
    # the operator returns node01 by hand (its link is the site's to repair)
    node_ssh(fleet, "127.0.51.2", "rm /var/lib/gpufleet/drained")


# what every command must say of node03 with nvsmi-oversized-field (a 2 MiB product name in -q -x)
REFUSED = (
    "nvidia-smi -q -x: the text of <product_name> of GPU '00000000:13:00.0' is 2097152 characters long "
    "(nvidia-smi prints no field over 1024)"
)


def test_output_gpufleet_cannot_read_is_a_named_failure_in_every_command(
    fleet: Fleet, provisioned: Path, tmp_path: Path
) -> None:
    """A node whose nvidia-smi -q -x prints one oversized field came out of drift ok with 0 checks (its
    result, over ansible-runner's MAX_EVENT_RES, reached the controller empty), drift --fix passed it
    over and the gate blocked it naming no reason. Drift, drift --fix, check, the watch and the gate
    each name it failed (the gate: blocked) with what was refused and why; cleared, drift finds it ok."""
    name = "node03"
    limit = ["--limit", name]
    assert control.fault(fleet, name, "nvsmi-oversized-field", clear=False) == ["nvsmi-oversized-field"]
    try:
        code, drift = run(fleet, ["drift", "--inventory", str(provisioned), *limit], tmp_path / "drift")
        assert code == 1
        host = drift["hosts"][name]
        assert host["status"] == "failed" and REFUSED in host["message"]
        assert len(host["checks"]) > 1  # the roles' checks came through, beside the failed one
        assert [(c["name"], c["value"]) for c in host["checks"] if not c["ok"]] == [("fleet.versions", None)]

        # left out of the rollout, named: nothing drains a node whose nvidia-smi gpufleet cannot read
        before = calls(fleet, name)
        code, fixed = run(
            fleet, ["drift", "--fix", "--inventory", str(provisioned), *limit], tmp_path / "fix"
        )
        assert code == 1
        assert fixed["hosts"][name]["status"] == "failed" and REFUSED in fixed["hosts"][name]["message"]
        assert calls(fleet, name) == before

        # provision --check: the roles' read of the GPUs (gpu_facts) refuses it
        code, check = run(fleet, ["check", "--inventory", str(provisioned), *limit], tmp_path / "check")
        assert code == 1
        assert check["hosts"][name]["status"] == "failed"
        assert "gpu_power : Gather GPU facts" in check["hosts"][name]["message"]
        assert REFUSED in check["hosts"][name]["message"]

        code, watched = run_on(fleet, tmp_path / "watch", "watch", *limit, "--window", "1")
        assert code == 1
        health = [c for c in watched["hosts"][name]["checks"] if c["name"] == "watch.health"]
        assert [(c["ok"], REFUSED in c["message"]) for c in health] == [(False, True)]
        assert REFUSED in watched["hosts"][name]["message"]

        code, gated = run_on(fleet, tmp_path / "gate", "gate", *limit, "--burn-in-seconds", "5")
        assert code == 1
        assert gated["hosts"][name]["status"] == "blocked"
        assert "Judge the node's hardware health" in gated["hosts"][name]["message"]
        assert REFUSED in gated["hosts"][name]["message"]
    finally:
        control.fault(fleet, name, "nvsmi-oversized-field", clear=True)
    code, again = run(fleet, ["drift", "--inventory", str(provisioned), *limit], tmp_path / "again")
    assert (code, again["hosts"][name]["status"]) == (0, "ok"), again["hosts"][name]


PEERS = ("node05", "node06", "node07", "node08")  # as provisioned: the tests above ran on node01..node04


def test_drift_names_the_odd_node_out_of_its_versions(
    fleet: Fleet, provisioned: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One node of four runs another VBIOS and NIC firmware (firmware-mismatch): drift fails it on
    fleet.versions[vbios] and [nic_firmware], its version against the three peers', and names no other."""
    control.fault(fleet, "node06", "firmware-mismatch", clear=False)
    try:
        capsys.readouterr()
        code, report = run(
            fleet, ["drift", "--inventory", str(provisioned), "--limit", ",".join(PEERS)], tmp_path / "drift"
        )
        console = {line.split()[0]: line.split()[1] for line in capsys.readouterr().err.splitlines()}
    finally:
        control.fault(fleet, "node06", "firmware-mismatch", clear=True)
    assert code == 1
    odd = report["hosts"]["node06"]
    assert (odd["status"], odd["changes"]) == ("failed", [])
    failed = {c["name"]: (c["value"], c["limit"]) for c in odd["checks"] if not c["ok"]}
    assert failed == {
        "fleet.versions[vbios]": ("97.10.4A.00.01", "97.10.4A.00.02"),
        "fleet.versions[nic_firmware]": ("40.44.1035", "40.44.1036"),
    }
    assert "the 97.10.4A.00.02 that 3 of the 4 nodes of NVIDIA B300" in odd["message"]
    assert "odd node out" in odd["message"]
    for name in ("node05", "node07", "node08"):
        host = report["hosts"][name]
        assert (host["status"], host["changes"]) == ("ok", []), name
        compared = [c for c in host["checks"] if c["name"].startswith("fleet.versions")]
        assert [c["ok"] for c in compared] == [True] * 4, name
        assert not any("node06" in str(c["message"]) for c in host["checks"]), name
    # the console's line says what the report says
    assert {name: console[name] for name in PEERS} == {**dict.fromkeys(PEERS, "ok"), "node06": "failed"}


# Every fault drift can see; node01 and node08 stay clean and node07 gets an edited boot file. Faults
# that each change settings of their own share a node (every node costs its drift, check and slice).
ALL_FAULTS = {
    "node02": ("power-capped", "pfc-off", "stale-nccl-topo"),
    "node03": ("persistence-off", "ecn-off", "roce-v1"),
    "node04": ("bus-order-swapped",),  # no setting changes: the pinning is by UUID
    "node05": ("gpu-missing",),  # a role cannot be planned: failed, not drift
    "node06": ("link-down",),  # a failed check, not a change
}
EDITED = "node07"


def test_drift_and_check_name_the_same_changes_for_every_fault(
    fleet: Fleet, provisioned: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Drift (node_facts: each role's plan, read-only) and `gpufleet check` (provision --check --diff:
    each role's module in check mode) run the same code: the whole set of {setting, from, to} is the
    same on every node of a fleet with every fault drift can see. The same drift in three slices
    through the execution-node protocol gives the same report (three_slices_give)."""
    for name in ALL_NODES:
        control.fault(fleet, name, None, clear=True)
    # the earlier tests ran on node01..node04 only (--limit): the other nodes are as provisioned
    code, report = run(
        fleet, ["provision", "--inventory", str(fleet.inventory_path), *LIMIT], tmp_path / "reprovision"
    )
    assert code == 0, {n: h["message"] for n, h in report["hosts"].items() if h["status"] != "changed"}
    assert set(node_hosts(report)) == set(NODES)
    for name, injected in ALL_FAULTS.items():
        for fault in injected:
            assert control.fault(fleet, name, fault, clear=False) == [fault]
    conf = fleet.root / "nodes" / EDITED / "etc-upper" / CONF
    lines = conf.read_text().splitlines(keepends=True)
    conf.write_text("".join(x if x.startswith("#") else x.split()[0] + " 1100\n" for x in lines))

    capsys.readouterr()
    code, drift = run(fleet, ["drift", "--inventory", str(fleet.inventory_path)], tmp_path / "drift")
    assert code == 1
    # without a terminal the run printed each host's result once: one line per host, in its status
    progress = [line.split() for line in capsys.readouterr().err.splitlines()]
    assert sorted(words[0] for words in progress) == sorted(drift["hosts"])
    assert {words[0]: words[1] for words in progress}["node05"] == "failed"
    code, check = run(fleet, ["check", "--inventory", str(fleet.inventory_path)], tmp_path / "check")
    assert code == 1
    assert set(node_hosts(drift)) == set(node_hosts(check)) == set(ALL_NODES)
    mismatched = {
        n: (changes(drift, n), changes(check, n)) for n in ALL_NODES if changes(drift, n) != changes(check, n)
    }
    assert mismatched == {}

    statuses = {n: drift["hosts"][n]["status"] for n in ALL_NODES}
    assert statuses == {n: check["hosts"][n]["status"] for n in ALL_NODES}
    assert statuses == {
        **dict.fromkeys(ALL_NODES, "drifted"),
        "node01": "ok",
        "node04": "ok",
        "node08": "ok",
        "node05": "failed",
        "node06": "failed",
    }
    named = {n: {c[0].split("[")[0] for c in changes(drift, n)} for n in ALL_NODES}
    assert named["node02"] == {"gpu_power.enforced_limit_w", "rdma_qos.pfc", "nccl_topology.file"}
    # the page has a column per setting family (16 GPUs' power limits are one), not one per GPU or port
    page = open_page(tmp_path / "drift" / "report.html", ARTIFACTS / "drift-every-fault-report.png")
    assert page.console == [] and page.page_errors == []
    every = set().union(*(families(h) for h in drift["hosts"].values()))
    assert sorted(page.columns) == sorted(every) and len(every) < len(
        {c["setting"] for h in drift["hosts"].values() for c in h["changes"]}
    )
    assert page.cells == sum(len(families(h)) for h in drift["hosts"].values())
    # the fault stops nvidia-persistenced too: the role enables and starts it, which sets persistence
    assert named["node03"] == {
        "gpu_power.persistence_mode",
        "gpu_power.nvidia_persistenced.enabled",
        "gpu_power.nvidia_persistenced.active",
        "rdma_qos.ecn_np",
        "rdma_qos.ecn_rp",
        "rdma_link.roce_mode",
    }
    # 15 GPUs: other limits in the boot conf and another topology; pinning cannot be planned
    assert named["node05"] == {"gpu_power.boot_file", "nccl_topology.file"}
    assert "gpu_pinning: Refusing to pin" in drift["hosts"]["node05"]["message"]
    # a NIC without link: the link is a failed check, and the topology is never rewritten around it
    assert named["node06"] == set()
    assert named[EDITED] == {"gpu_power.boot_file"}
    assert [c["name"] for c in drift["hosts"]["node06"]["checks"] if not c["ok"]] == [
        "rdma_link.link_state[mlx5_7]"
    ]
    three_slices_give(fleet, drift, tmp_path)


def three_slices_give(fleet: Fleet, local: dict[str, Any], tmp_path: Path) -> None:
    """AWX runs a sliced job on execution nodes (ansible-runner transmit | worker | process) and keeps
    only the events: `gpufleet report --from-events` on the three slices' artifacts must be ``local``,
    the report of a local `gpufleet drift` of the same fleet (hosts, statuses, changes, checks)."""
    slices = execution_node.sliced(list(ALL_NODES), 3)
    assert [len(s) for s in slices] == [3, 3, 2]
    pipelines = []
    for number, hosts in enumerate(slices, start=1):
        private = execution_node.private_data_dir(
            tmp_path / f"slice{number}", fleet.inventory_path, hosts, fleet.vault_password_file
        )
        pipelines.append(
            execution_node.run_streamed(
                private, "drift.yml", tmp_path / "controller", f"slice{number}", fleet.vault_password_file
            )
        )
    for pipeline in pipelines:
        execution_node.finish(pipeline, timeout=600)
    artifacts = [tmp_path / "controller" / "artifacts" / f"slice{n}" for n in (1, 2, 3)]
    assert all((a / "job_events").is_dir() for a in artifacts)

    code = cli.main(
        ["report", "--from-events", *map(str, artifacts), "--report-dir", str(tmp_path / "merged")]
    )
    merged = json.loads((tmp_path / "merged" / "report.json").read_text())
    assert code == 1
    assert merged["command"] == "drift" and merged["summary"] == local["summary"]
    assert set(merged["hosts"]) == set(local["hosts"])
    for name, host in local["hosts"].items():
        theirs = merged["hosts"][name]
        assert (theirs["status"], theirs["changes"], theirs["checks"]) == (
            host["status"],
            host["changes"],
            host["checks"],
        ), name

    # the same slice given twice is refused, naming its host; so is a directory that is not artifacts
    code = cli.main(
        [
            "report",
            "--from-events",
            str(artifacts[0]),
            str(artifacts[0]),
            "--report-dir",
            str(tmp_path / "twice"),
        ]
    )
    assert code == 2 and not (tmp_path / "twice" / "report.json").exists()
    code = cli.main(
        ["report", "--from-events", str(tmp_path / "slice1"), "--report-dir", str(tmp_path / "no")]
    )
    assert code == 2
